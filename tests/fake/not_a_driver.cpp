// A shared library that is not a CUDA driver: it exports no cu* symbol.
extern "C" int not_a_cuda_driver() { return 42; }
