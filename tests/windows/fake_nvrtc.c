/* A stand-in for NVRTC's DLL (nvrtc64_130_0.dll), for the Windows loader
   test: nvrtcVersion answers 13.0. */
__declspec(dllexport) int nvrtcVersion(int* major, int* minor) {
  *major = 13;
  *minor = 0;
  return 0;
}
