// libtorch's TF32 switches (at::Context) behind a C interface, for basin-core's `device`
// module: PyTorch's `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`.
#include <ATen/Context.h>

extern "C" {

void basin_set_allow_tf32(bool on) {
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

bool basin_allow_tf32() { return at::globalContext().allowTF32CuBLAS(); }

}
