// The C++ glue that makes DeviceType::HPU a working device on public PyTorch.
// It has no per-op code: it registers what torch only accepts from C++ (a device guard,
// HPU hooks, an allocator) plus the storage-level kernels (empty, views, resize_, set_)
// that reuse torch's device-agnostic implementations. Memory comes from the Go core.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/HPUHooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

extern "C" {
int hpusim_init(void);
int hpusim_device_count(void);
int hpusim_alloc(int dev, int64_t nbytes, void** out);
int hpusim_free(void* p);
int hpusim_last_error(char* buf, int n);
int hpusim_check_dtype(int dtype);
int hpusim_synchronize(int dev);
int hpusim_lazy_quiesce(void);
}

namespace hpusim_glue {

static std::string last_error() {
  char buf[1024];
  buf[0] = 0;
  hpusim_last_error(buf, sizeof(buf));
  return std::string(buf);
}

static thread_local c10::DeviceIndex tl_device = 0;

static c10::DeviceIndex device_count() {
  return static_cast<c10::DeviceIndex>(hpusim_device_count());
}

static void check_index(c10::DeviceIndex idx) {
  // The bridge's assertion text for a bad index.
  TORCH_CHECK(idx >= 0 && idx < device_count(), "Invalid device id");
}

struct HPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::HPU; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::HPU, tl_device);
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_hpu(), "expected an hpu device, got ", d);
    if (d.has_index()) {
      check_index(d.index());
      tl_device = d.index();
    }
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index()) tl_device = d.index();
  }
  // One default stream per device: emulated work is ordered on the host.
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { hpusim_synchronize(s.device_index()); }
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex i) const override { hpusim_synchronize(i); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  double elapsedTime(void*, void*, const c10::DeviceIndex) const override { return 0.0; }
};

C10_REGISTER_GUARD_IMPL(HPU, HPUGuardImpl);

static void free_hpu(void* p) {
  if (p != nullptr) hpusim_free(p);  // unknown pointers are reported by Go, never freed
}

struct HPUAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex dev = tl_device;
    void* p = nullptr;
    if (n > 0) {
      int rc = hpusim_alloc(dev, static_cast<int64_t>(n), &p);
      TORCH_CHECK(rc == 0, last_error());
    }
    return {p, p, &free_hpu, c10::Device(c10::DeviceType::HPU, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_hpu; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    hpusim_lazy_quiesce();  // lazy mode: the source's pending writes must have run
    std::memcpy(dest, src, count);  // device memory is host memory in the emulator
  }
};

static HPUAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::HPU, &g_allocator);

// Pinned host memory for hpu (Tensor.pin_memory("hpu"), DataLoader(pin_memory_device="hpu")):
// the bridge's host allocator for DMA-able buffers. The emulated device reads host memory
// directly, so pinning is plain aligned host memory; the allocator remembers its live
// blocks so is_pinned() answers for exactly the tensors it made.
static std::mutex g_pinned_mu;
static std::unordered_set<const void*> g_pinned;

static void free_pinned(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    g_pinned.erase(p);
  }
  std::free(p);
}

struct PinnedHostAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0) {
      p = std::aligned_alloc(64, (n + 63) / 64 * 64);
      TORCH_CHECK(p != nullptr, "hpu pinned host memory: out of memory allocating ", n, " bytes");
      std::lock_guard<std::mutex> lock(g_pinned_mu);
      g_pinned.insert(p);
    }
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

static PinnedHostAllocator g_pinned_allocator;

static bool is_pinned_ptr(const void* p) {
  std::lock_guard<std::mutex> lock(g_pinned_mu);
  return g_pinned.count(p) != 0;
}

// Hooks make HPU "the accelerator" for torch versions whose autograd engine asks for one.
// has_hpu starts false; the Python side turns it on only if a probe backward needs it.
static std::atomic<bool> g_has_hpu{false};

}  // namespace hpusim_glue

namespace hpusim_random {  // hpu_random.cpp
at::Generator new_generator();
const at::Generator& default_generator();
}  // namespace hpusim_random

// The registry key is the class name, so this class must be called HPUHooks.
struct HPUHooks final : public at::HPUHooksInterface {
  HPUHooks(at::HPUHooksArgs) {}
  void init() const override {}
  bool hasHPU() const override { return hpusim_glue::g_has_hpu.load(); }
  bool isAvailable() const override { return hpusim_device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return hpusim_glue::device_count(); }
  c10::Device getDeviceFromPtr(void*) const override {
    return c10::Device(c10::DeviceType::HPU, hpusim_glue::tl_device);
  }
  bool isPinnedPtr(const void* p) const override { return hpusim_glue::is_pinned_ptr(p); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &hpusim_glue::g_pinned_allocator; }
  // As the bridge: CPU generators (hpu_random.cpp), so torch.Generator(device="hpu") works.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return hpusim_random::default_generator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return hpusim_random::new_generator(); }
};
namespace at {
REGISTER_HPU_HOOKS(HPUHooks);
}  // namespace at

namespace hpusim_glue {

struct DeviceScope {
  c10::DeviceIndex saved;
  explicit DeviceScope(std::optional<c10::Device> d) : saved(tl_device) {
    if (d.has_value() && d->has_index()) {
      check_index(d->index());
      tl_device = d->index();
    }
  }
  ~DeviceScope() { tl_device = saved; }
};

static void check_dtype(c10::ScalarType st) {
  TORCH_CHECK(hpusim_check_dtype(static_cast<int>(st)) == 0, last_error());
}

static const c10::DispatchKeySet kHPUKeys(c10::DispatchKey::HPU);

at::Tensor empty_hpu(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                     std::optional<bool> pin_memory,
                     std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "hpu supports only strided tensors");
  auto st = c10::dtype_or_default(dtype);
  check_dtype(st);
  DeviceScope scope(device);
  return at::detail::empty_generic(size, &g_allocator, kHPUKeys, st, memory_format);
}

at::Tensor empty_strided_hpu(at::IntArrayRef size, at::IntArrayRef stride,
                             std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout,
                             std::optional<at::Device> device,
                             std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "hpu supports only strided tensors");
  auto st = c10::dtype_or_default(dtype);
  check_dtype(st);
  DeviceScope scope(device);
  return at::detail::empty_strided_generic(size, stride, &g_allocator, kHPUKeys, st);
}

const at::Tensor& resize_hpu_(const at::Tensor& self, at::IntArrayRef size,
                              std::optional<at::MemoryFormat> memory_format) {
  DeviceScope scope(self.device());
  // Growing a storage copies its old bytes on the host; in lazy mode they may not have been
  // produced yet, so pending graphs run first (a no-op in eager mode).
  size_t old_bytes = self.storage().nbytes();
  if (old_bytes > 0 &&
      at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(), self.storage_offset()) > old_bytes) {
    hpusim_lazy_quiesce();
  }
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& set_storage_hpu_(at::Tensor& self, at::Storage source, int64_t storage_offset,
                             at::IntArrayRef size, at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  std::optional<at::IntArrayRef> stride_opt =
      stride.data() != nullptr ? std::optional<at::IntArrayRef>(stride) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, stride_opt);
  return self;
}

at::Tensor& set_source_tensor_hpu_(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() != source.unsafeGetTensorImpl()) {
    return set_storage_hpu_(self, source.storage(), source.storage_offset(), source.sizes(),
                            source.strides());
  }
  return self;
}

at::Tensor& set_storage_whole_hpu_(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_hpu_(self, source, 0, {n}, {});
}

at::Tensor& set_empty_hpu_(at::Tensor& self) {
  DeviceScope scope(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_allocator, true);
  return set_storage_hpu_(self, storage, 0, {0}, {});
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_hpu));
  m.impl("empty_strided", TORCH_FN(empty_strided_hpu));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("resize_", TORCH_FN(resize_hpu_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_hpu_));
  m.impl("set_.source_Storage", TORCH_FN(set_storage_whole_hpu_));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor_hpu_));
  m.impl("set_", TORCH_FN(set_empty_hpu_));
}

}  // namespace hpusim_glue

extern "C" {
// The calling thread's current hpu device (the guard's thread-local index).
int hpusim_glue_current_device(void) { return hpusim_glue::tl_device; }
int hpusim_glue_set_device(int idx) {
  if (idx < 0 || idx >= hpusim_device_count()) return 1;
  hpusim_glue::tl_device = static_cast<c10::DeviceIndex>(idx);
  return 0;
}
// Called from Python when a probe shows autograd needs HPU to be the accelerator.
void hpusim_glue_set_has_hpu(int on) { hpusim_glue::g_has_hpu.store(on != 0); }
int hpusim_glue_has_hpu(void) { return hpusim_glue::g_has_hpu.load() ? 1 : 0; }
}
