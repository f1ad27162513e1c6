#include "oxicuda.hpp"

int count_in_b() {
  (void)oxicuda::driver_info();
  return static_cast<int>(oxicuda::ffi::entry_count);
}
