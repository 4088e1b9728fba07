// The AutocastHPU kernels (_autocast.py) in C++: one boxed kernel per cast policy, registered
// at run time for the ops on the lists _autocast.py reads (the defaults or the files the
// PT_HPU_AUTOCAST_*_OPS_LIST variables name).
//
// In Python each autocast op cost ~80 us of interpreter work on top of its casts (argument
// boxing into Python, the guard, the per-argument checks), more than a small linear layer
// takes: an autocast MLP training step ran at 0.76x of CPU autocast, which does this in
// C++. The semantics are _autocast.py's: eligible are floating-point hpu tensors other than
// double (alone or in a tensor list); casts go through Tensor::to below the autocast key, so
// autograd records them; nothing is cached.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpusim_autocast __attribute__((visibility("hidden"))) {
namespace py = pybind11;

// Policy codes, as _autocast.py passes them.
enum Policy { kLower = 0, kFP32 = 1, kPromote = 2, kLowerFirstArg = 3 };

std::unique_ptr<torch::Library> g_lib;
// _autocast._lower_dtype: raises for float16 on a first-generation Gaudi. Called only when
// the autocast dtype is float16 (leaked: it must outlive the interpreter's teardown).
py::object* g_fp16_check = nullptr;

bool eligible(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::HPU && t.is_floating_point() &&
         t.scalar_type() != at::kDouble;
}

at::ScalarType lower_dtype() {
  at::ScalarType dtype = at::autocast::get_autocast_dtype(c10::DeviceType::HPU);
  if (dtype == at::kHalf && g_fp16_check != nullptr) {
    py::gil_scoped_acquire gil;
    (*g_fp16_check)();
  }
  return dtype;
}

at::Tensor cast(const at::Tensor& t, at::ScalarType dtype) {
  return eligible(t) && t.scalar_type() != dtype ? t.to(dtype) : t;
}

void cast_value(c10::IValue& v, at::ScalarType dtype) {
  if (v.isTensor()) {
    v = cast(v.toTensor(), dtype);
  } else if (v.isTensorList()) {
    auto list = v.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) out.push_back(cast(t, dtype));
    v = std::move(out);
  } else if (v.isList()) {
    auto list = v.toList();
    for (size_t i = 0; i < list.size(); i++) {
      c10::IValue e = list.get(i);
      if (e.isTensor()) list.set(i, cast(e.toTensor(), dtype));
    }
  }
}

// at::autocast::promote_type over the arguments: float32 wins over the lower type.
at::ScalarType widest(at::ScalarType lower, const torch::jit::Stack& stack, size_t begin) {
  at::ScalarType current = lower;
  auto visit = [&](const at::Tensor& t) {
    if (!eligible(t)) return;
    if (t.scalar_type() == at::kFloat) {
      current = at::kFloat;
    } else {
      TORCH_CHECK(t.scalar_type() == lower, "Unexpected floating ScalarType in at::autocast::prioritize");
    }
  };
  for (size_t i = begin; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor());
    }
  }
  return current;
}

template <Policy P>
void kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::AutocastHPU);
  const size_t n = op.schema().arguments().size();
  const size_t begin = stack->size() - n;
  at::ScalarType dtype = at::kFloat;
  if (P != kFP32) dtype = lower_dtype();
  if (P == kPromote) dtype = widest(dtype, *stack, begin);
  const size_t end = P == kLowerFirstArg ? std::min(begin + 1, stack->size()) : stack->size();
  for (size_t i = begin; i < end; i++) cast_value((*stack)[i], dtype);
  op.callBoxed(stack);
}

// Registers the kernels: ops holds (name or name.overload, policy code) pairs.
void register_kernels(const std::vector<std::pair<std::string, int>>& ops, py::object fp16_check) {
  TORCH_CHECK(!g_lib, "the AutocastHPU kernels are registered already");
  g_fp16_check = new py::object(std::move(fp16_check));
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastHPU,
                                              __FILE__, __LINE__);
  for (const auto& [name, policy] : ops) {
    switch (policy) {
      case kLower:
        lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel<kLower>>());
        break;
      case kFP32:
        lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel<kFP32>>());
        break;
      case kPromote:
        lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel<kPromote>>());
        break;
      case kLowerFirstArg:
        lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&kernel<kLowerFirstArg>>());
        break;
      default:
        TORCH_CHECK(false, "unknown autocast policy ", policy, " for ", name);
    }
  }
  g_lib = std::move(lib);
}

}  // namespace hpusim_autocast

PYBIND11_MODULE(_autocast_C, m) {
  m.doc() = "hpusim's AutocastHPU kernels in C++ (the policies of _autocast.py)";
  m.def("register_kernels", &hpusim_autocast::register_kernels, pybind11::arg("ops"), pybind11::arg("fp16_check"));
}
