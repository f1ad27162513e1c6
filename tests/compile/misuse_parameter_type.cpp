// Must not compile: a kernel parameter type that is not trivially copyable.
#include <string>

#include "oxicuda.hpp"

oxicuda::Kernel<void(std::string)> k;
