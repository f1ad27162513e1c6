// Two translation units including oxicuda.hpp link into one program: every
// function in the header is inline, every variable inline or local.
#include "oxicuda.hpp"

int count_in_b();

int main() {
  // Both units see the one process-wide driver state.
  const auto* a = &oxicuda::driver_info();
  const int b = count_in_b();
  return (a == &oxicuda::driver_info() && b == static_cast<int>(oxicuda::ffi::entry_count)) ? 0 : 1;
}
