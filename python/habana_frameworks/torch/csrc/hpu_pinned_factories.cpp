// torch.empty/zeros/ones/full/tensor(..., pin_memory=True) pin through the hpu host allocator.
//
// On Gaudi the bridge's torch is built without CUDA, so a factory's pin_memory=True reaches
// the HPU hooks' pinned host allocator. The public CUDA wheel asks CUDA first (its hooks say
// "has CUDA" even without a driver) and raises "Found no NVIDIA driver". The CPU kernels of
// aten::empty.memory_format and aten::empty_strided (every pinned factory allocates through
// one of them) are therefore wrapped: pin_memory=True allocates from the hooks' pinned
// allocator (csrc/hpu_glue.cpp), anything else goes to torch's own CPU kernel unchanged.
// When the process has a working CUDA, torch's own kernels stay: pinning is CUDA's then.
//
// Registered when Python asks (once, at import), with torch's "Overriding a previously
// registered kernel" warning for exactly these two kernels kept out of the user's log.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/HPUHooksInterface.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>

namespace {

constexpr c10::DispatchKeySet kCPUKeys(c10::DispatchKey::CPU);

// As torch does before it pins for a device: initialise it, or Context::isPinnedPtr answers
// false for every pointer of a device it has not seen initialised (is_pinned() would lie).
c10::Allocator* pinned_allocator() {
  at::globalContext().lazyInitDevice(c10::DeviceType::HPU);
  return at::detail::getHPUHooks().getPinnedMemoryAllocator();
}

// As torch's CPU empty: under torch.use_deterministic_algorithms(True) uninitialised memory
// is filled (NaN / the integer maximum) when fill_uninitialized_memory is on.
at::Tensor deterministic(at::Tensor t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_cpu_maybe_pinned(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                  std::optional<at::Layout> layout, std::optional<at::Device> device,
                                  std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  if (!pin_memory.value_or(false)) {
    return at::native::empty_cpu(size, dtype, layout, device, pin_memory, memory_format);
  }
  return deterministic(
      at::detail::empty_generic(size, pinned_allocator(), kCPUKeys, c10::dtype_or_default(dtype), memory_format));
}

at::Tensor empty_strided_cpu_maybe_pinned(at::IntArrayRef size, at::IntArrayRef stride,
                                          std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                          std::optional<at::Device> device, std::optional<bool> pin_memory) {
  if (!pin_memory.value_or(false)) {
    return at::native::empty_strided_cpu(size, stride, dtype, layout, device, pin_memory);
  }
  return deterministic(
      at::detail::empty_strided_generic(size, stride, pinned_allocator(), kCPUKeys, c10::dtype_or_default(dtype)));
}

// Drops torch's override notice for the two kernels wrapped here; passes every other warning on.
struct QuietOverride final : public c10::WarningHandler {
  c10::WarningHandler* next;
  explicit QuietOverride(c10::WarningHandler* n) : next(n) {}
  void process(const c10::Warning& w) override {
    if (w.msg().find("Overriding a previously registered kernel") != std::string::npos) return;
    next->process(w);
  }
};

}  // namespace

extern "C" {
// Wraps the CPU kernels (idempotent). Returns 0, or 1 if torch refused the registration.
int hpusim_glue_pinned_factories(void) {
  static std::once_flag once;
  static int status = 0;
  std::call_once(once, [] {
    QuietOverride quiet(c10::WarningUtils::get_warning_handler());
    c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    try {
      // Leaked on purpose: a registration lives as long as the process.
      auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
      lib->impl("empty.memory_format", TORCH_FN(empty_cpu_maybe_pinned));
      lib->impl("empty_strided", TORCH_FN(empty_strided_cpu_maybe_pinned));
    } catch (const std::exception&) {
      status = 1;
    }
  });
  return status;
}
}
