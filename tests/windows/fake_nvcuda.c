/* A stand-in for the driver's nvcuda.dll, for the Windows loader test (run
   under Wine): cuInit answers CUDA_ERROR_NO_DEVICE (100), so the loader must
   find it, resolve it and explain why it cannot be used. */
__declspec(dllexport) int __stdcall cuInit(unsigned int flags) { return flags == 0 ? 100 : 1; }
__declspec(dllexport) int __stdcall cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}
