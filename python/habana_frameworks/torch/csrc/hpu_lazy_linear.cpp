// aten::linear for lazy mode: mixed input/weight dtypes, as the lazy bridge's kernel allows.
//
// The lazy bridge registers its own hpu kernels for aten::linear and aten::linear_backward
// (LinearMeta takes the input's dtype and checks shapes only), so nn.Linear(fp32) applied to
// a bfloat16 activation left over from an autocast region runs there and returns bfloat16;
// torch's composite lowers to addmm/matmul and raises "mat1 and mat2 must have the same
// dtype". Eager mode and torch.compile keep torch's composite (the bridge decomposes there
// too: PT_HPU_OVERRIDE_LINEAR_MATMUL_EAGER defaults to false), so the kernels are registered
// only when Python asks, once, at import in lazy mode.
//
// The weight and bias are cast to the input's dtype and torch's composite runs on them; the
// casts carry the gradients back to the parameters in their own dtype. One-dtype calls go
// straight to the composite, at the cost of one C++ call.
#include <ATen/ATen.h>
#include <ATen/ops/linear_native.h>
#include <torch/library.h>

#include <mutex>

namespace {

bool castable(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

at::Tensor lazy_linear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const c10::ScalarType d = input.scalar_type();
  if (!castable(d)) return at::native::linear(input, weight, bias);
  at::Tensor w = weight;
  if (w.scalar_type() != d && castable(w.scalar_type())) w = w.to(d);
  std::optional<at::Tensor> b = bias;
  if (b && b->defined() && b->scalar_type() != d && castable(b->scalar_type())) b = b->to(d);
  return at::native::linear(input, w, b);
}

}  // namespace

extern "C" {
// Registers the kernels at the HPU and AutogradHPU keys (both: inference_mode tensors skip
// the autograd keys). Idempotent; returns 0, or 1 if torch refused the registration.
int hpusim_glue_lazy_linear(void) {
  static std::once_flag once;
  static int status = 0;
  std::call_once(once, [] {
    try {
      // Leaked on purpose: a registration lives as long as the process.
      auto* autograd = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradHPU, __FILE__,
                                          __LINE__);
      autograd->impl("linear", TORCH_FN(lazy_linear));
      auto* backend = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::HPU, __FILE__, __LINE__);
      backend->impl("linear", TORCH_FN(lazy_linear));
    } catch (const std::exception&) {
      status = 1;
    }
  });
  return status;
}
}
