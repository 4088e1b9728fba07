// The host side of a recipe run (_recipe.Recipe.run/launch) in C++: check the inputs
// against the capture, allocate the fresh output storages, call the Go core once, and
// build the outputs (fresh tensors, views of inputs, captured constants).
//
// Done in Python, that was ~20 us a run (ctypes argument arrays, torch.empty_strided per
// output, the checks in interpreted code): more than the small graphs it runs. Here it is
// a few microseconds. The spec of a recipe is built once, at capture end, from the
// captured tensors; the precise error for inputs that do not match stays in Python
// (run returns None and _recipe raises it).
//
// copy_launch is an HPU-graph replay with the tensor cache in one call: the caller's new
// inputs are copied into the graph's static inputs and the recipe is launched after them.
// The copies are a graph the core compiled once for the recipe (hpusim_recipe_set_copy_in),
// queued with the recipe by one call (hpusim_recipe_launch_copy): nothing is recorded,
// built or looked up per replay. Sources sharing a storage with each other or with a
// static tensor take the general path (the core's "copy" op as `static.copy_(new)`, then
// the launch).
//
// ReplayCache is wrap_in_hpu_graph's hit path: a call whose positional arguments are
// hpu tensors (no views, no keyword arguments) it has seen replays its graph with
// copy_launch and returns the graph's static outputs, without running Python.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/autocast_mode.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
int hpusim_run(int op, int64_t* desc, int ndesc, double* fl, int nf);
int hpusim_recipe_run(int64_t h, void** in, int nin, void** out, int nout, int64_t* rnd, int nrnd);
int hpusim_recipe_launch(int64_t h, void** in, int nin, void** out, int nout, int64_t* rnd, int nrnd);
int hpusim_recipe_run_alloc(int64_t h, int launch, int dev, void** in, int nin, void** out, int64_t* nbytes, int nout,
                            int64_t* rnd, int nrnd);
int hpusim_recipe_set_copy_in(int64_t h, int64_t* desc, int ndesc);
int hpusim_recipe_launch_copy(int64_t h, void** src, int nsrc, void** in, int nin, void** out, int nout,
                              int64_t* rnd, int nrnd);
int hpusim_capture_active();
int hpusim_last_error(char* buf, int n);
int hpusim_stream_touches(void* p, int64_t nbytes);
}

// Hidden, as pybind11 is: the specs hold Python objects.
namespace hpusim_recipe __attribute__((visibility("hidden"))) {
namespace py = pybind11;

struct Meta {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;

  static Meta of(const at::Tensor& t) {
    return Meta{t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset()};
  }
};

struct Input {
  bool tensor;
  Meta meta;
  bool check_offset;  // the graph reaches outside the view: the storage offset must match too
  py::object value;   // a non-tensor input: the value it was captured with
};

enum SlotKind { kSlotBound, kSlotBytes, kSlotTyped };
struct Slot {
  SlotKind kind;
  int64_t nbytes;
  Meta meta;
};

enum OutKind { kOutConst, kOutInputView, kOutFresh, kOutSame };
struct Output {
  OutKind kind;
  int64_t index;  // input (view), slot (fresh) or earlier output (same)
  bool whole;     // fresh: the slot's tensor itself
  int64_t delta;  // input view: element offset from the input's own
  Meta meta;
  py::object value;  // const
};

[[noreturn]] void raise_last_error() {
  char buf[4096];
  hpusim_last_error(buf, sizeof(buf));
  throw std::runtime_error(buf);
}

class RecipeCall {
 public:
  RecipeCall(int64_t handle, int device) : handle_(handle), device_(c10::DeviceType::HPU, device) {}

  void add_tensor_input(const at::Tensor& t, bool check_offset) {
    inputs_.push_back(Input{true, Meta::of(t), check_offset, py::none()});
  }
  void add_value_input(py::object v) { inputs_.push_back(Input{false, Meta{}, false, std::move(v)}); }
  void add_alias_check(int64_t i, int64_t j, int64_t dist) { aliases_.push_back({i, j, dist}); }
  // Input i holds class targets in [0, hi) or ignore, scanned before an asynchronous
  // launch (checked_launch).
  void add_index_check(int64_t i, int64_t hi, int64_t ignore) { index_checks_.push_back({i, hi, ignore}); }

  // A slot's nbytes is the size of the storage a run allocates for it (0: bound, or empty).
  void add_slot_bound() { add_slot(Slot{kSlotBound, 0, Meta{}}); }
  void add_slot_bytes(int64_t nbytes) {
    add_slot(Slot{kSlotBytes, nbytes, Meta{c10::ScalarType::Byte, {nbytes}, {1}, 0}});
  }
  void add_slot_like(const at::Tensor& t) {
    Meta m = Meta::of(t);
    int64_t nbytes = static_cast<int64_t>(
        at::detail::computeStorageNbytes(m.sizes, m.strides, c10::elementSize(m.dtype)));
    add_slot(Slot{kSlotTyped, nbytes, std::move(m)});
  }

  void add_out_const(py::object v) { outputs_.push_back(Output{kOutConst, 0, false, 0, Meta{}, std::move(v)}); }
  void add_out_input_view(int64_t i, const at::Tensor& o, int64_t delta) {
    outputs_.push_back(Output{kOutInputView, i, false, delta, Meta::of(o), py::none()});
  }
  void add_out_fresh(int64_t slot, bool whole, const at::Tensor& o) {
    outputs_.push_back(Output{kOutFresh, slot, whole, 0, Meta::of(o), py::none()});
  }
  void add_out_same(int64_t k) { outputs_.push_back(Output{kOutSame, k, false, 0, Meta{}, py::none()}); }

  // A static tensor copy_launch fills from the caller's tensor; copy_op is the core's id of
  // its "copy" op. The hpusim_run frame (dst then src: pointer, dtype, rank, sizes,
  // strides; no ints) is built here once; a launch only sets the source pointer.
  void add_copy_in(const at::Tensor& dst, int copy_op) {
    CopyIn c{dst, dst.numel() == 0 ? nullptr : dst.storage().data(), copy_op, {2}, 0};
    copy_graph_ = kCopyGraphUnset;
    for (int k = 0; k < 2; ++k) {
      if (k == 1) c.src_at = static_cast<int>(c.frame.size());
      c.frame.push_back(reinterpret_cast<int64_t>(dst.data_ptr()));
      c.frame.push_back(static_cast<int64_t>(dst.scalar_type()));
      c.frame.push_back(dst.dim());
      c.frame.insert(c.frame.end(), dst.sizes().begin(), dst.sizes().end());
      c.frame.insert(c.frame.end(), dst.strides().begin(), dst.strides().end());
    }
    c.frame.push_back(0);
    copies_.push_back(std::move(c));
  }

  // Copies srcs[k] into the k-th static tensor (add_copy_in), then launches the recipe
  // over `inputs` as run(inputs, launch=True). Returns None, having done nothing, when a
  // source is not an hpu tensor of its static tensor's dtype, shape and strides (the caller
  // then copies with copy_, converting as copy_ does, and launches), or when the recipe was
  // released.
  py::object copy_launch(py::handle srcs, py::handle inputs, int64_t rnd, int nrnd) {
    if (handle_ == 0) return py::none();
    py::sequence seq = py::reinterpret_borrow<py::sequence>(srcs);
    const size_t n = static_cast<size_t>(PySequence_Size(seq.ptr()));
    if (n != copies_.size()) return py::none();
    c10::SmallVector<void*, 8> from(n);
    c10::SmallVector<const void*, 8> storages(n);
    bool one_graph = copy_graph_ready();  // every copy in the core's copy-in graph
    for (size_t k = 0; k < n; ++k) {
      py::object holder;
      PyObject* x;
      if (PyTuple_Check(seq.ptr())) {
        x = PyTuple_GET_ITEM(seq.ptr(), k);
      } else {
        holder = seq[k];
        x = holder.ptr();
      }
      if (!THPVariable_Check(x)) return py::none();
      const at::Tensor& t = THPVariable_Unpack(x);
      const at::Tensor& dst = copies_[k].dst;
      if (t.device() != dst.device() || t.scalar_type() != dst.scalar_type() || t.sizes() != dst.sizes() ||
          t.strides() != dst.strides())
        return py::none();
      from[k] = t.numel() == 0 || t.data_ptr() == dst.data_ptr() ? nullptr : const_cast<void*>(t.data_ptr());
      storages[k] = t.numel() == 0 ? nullptr : t.storage().data();
      if (from[k] == nullptr) one_graph = false;
    }
    if (one_graph) {
      // The copy-in graph needs each source in a storage of its own, none a static one's.
      for (size_t k = 0; k < n && one_graph; ++k) {
        for (size_t j = 0; j < n; ++j) {
          if ((j < k && storages[j] == storages[k]) || copies_[j].storage == storages[k]) {
            one_graph = false;
            break;
          }
        }
      }
    }
    if (one_graph) {
      py::object flat = run_impl(inputs, true, rnd, nrnd, from.data(), static_cast<int>(n));
      if (flat.is_none()) throw py::value_error("recipe inputs do not match the capture");
      if (!flat.is(aliased())) return flat;
      // A source shares a storage with memory the recipe uses (a parameter, a static
      // output): nothing ran; copy op by op below.
    }
    for (size_t k = 0; k < n; ++k) {
      if (from[k] == nullptr) continue;  // empty, or the static tensor itself
      CopyIn& c = copies_[k];
      c.frame[1] = reinterpret_cast<int64_t>(c.dst.data_ptr());
      c.frame[c.src_at] = reinterpret_cast<int64_t>(from[k]);
      if (hpusim_run(c.op, c.frame.data(), static_cast<int>(c.frame.size()), nullptr, 0) != 0) raise_last_error();
    }
    py::object flat = run(inputs, true, rnd, nrnd);
    if (flat.is_none()) throw py::value_error("recipe inputs do not match the capture");
    return flat;
  }

  // run_impl's answer when the core refused the copy sources (they alias its memory).
  static const py::object& aliased() {
    static const py::object* marker = new py::object(py::module_::import("builtins").attr("object")());
    return *marker;
  }

  // The recipe was released (Recipe.__del__): calls return None from now on.
  void release() { handle_ = 0; }

  // An asynchronous launch (2) of a graph that reads class targets (cross_entropy's) from
  // its inputs scans them here first, so that a bad one raises IndexError at the call as
  // CPU does; targets the host cannot scan (strided, or still being written by a launched
  // graph) make the run synchronous (0): its kernel checks them.
  int checked_launch(const c10::SmallVector<at::Tensor, 8>& tensors) const {
    for (const auto& c : index_checks_) {
      const at::Tensor& t = tensors[c[0]];
      if (!t.defined() || !t.is_contiguous()) return 0;
      const int64_t n = t.numel();
      if (n == 0) continue;
      const bool i64 = t.scalar_type() == at::kLong;
      if (!i64 && t.scalar_type() != at::kInt) return 0;
      void* p = const_cast<void*>(t.data_ptr());
      if (hpusim_stream_touches(p, n * t.element_size()) != 0) return 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t v = i64 ? static_cast<const int64_t*>(p)[k] : static_cast<const int32_t*>(p)[k];
        if ((v < 0 || v >= c[1]) && v != c[2])
          throw py::index_error("nll_loss: Target " + std::to_string(v) + " is out of bounds.");
      }
    }
    return 2;
  }

  py::object run(py::handle inputs, int launch, int64_t rnd, int nrnd) {
    return run_impl(inputs, launch, rnd, nrnd, nullptr, 0);
  }

  // Runs (launch: queues, in lazy mode) the recipe over `inputs`; rnd points at nrnd int64
  // (seed, offset) words; with nsrc > 0, src are the copy-in sources (launch only).
  // Returns the flat outputs, or None when the inputs do not match the capture (the caller
  // explains how).
  py::object run_impl(py::handle inputs, int launch, int64_t rnd, int nrnd, void** src, int nsrc) {
    if (handle_ == 0) throw std::runtime_error("recipe was released");
    py::sequence seq = py::reinterpret_borrow<py::sequence>(inputs);
    const size_t n = static_cast<size_t>(PySequence_Size(seq.ptr()));
    if (n != inputs_.size()) return py::none();
    // Locals, not members: the GIL is released around the Go call, so another thread
    // may run this recipe meanwhile.
    c10::SmallVector<void*, 8> in_ptrs(n), out_ptrs(slots_.size());
    c10::SmallVector<at::Tensor, 8> tensors(n), fresh(slots_.size());
    for (size_t i = 0; i < n; ++i) {
      py::object x = seq[i];
      const Input& spec = inputs_[i];
      if (!spec.tensor) {
        if (THPVariable_Check(x.ptr())) return py::none();
        int eq = PyObject_RichCompareBool(x.ptr(), spec.value.ptr(), Py_EQ);
        if (eq < 0) throw py::error_already_set();
        if (eq == 0) return py::none();
        in_ptrs[i] = nullptr;
        continue;
      }
      if (!THPVariable_Check(x.ptr())) return py::none();
      const at::Tensor& t = THPVariable_Unpack(x.ptr());
      if (t.device().type() != c10::DeviceType::HPU || t.scalar_type() != spec.meta.dtype ||
          t.sizes() != c10::IntArrayRef(spec.meta.sizes) || t.strides() != c10::IntArrayRef(spec.meta.strides) ||
          (spec.check_offset && t.storage_offset() != spec.meta.offset))
        return py::none();
      tensors[i] = t;
      in_ptrs[i] = const_cast<void*>(t.data_ptr());
    }
    for (const auto& a : aliases_) {
      auto d = static_cast<char*>(in_ptrs[a[1]]) - static_cast<char*>(in_ptrs[a[0]]);
      if (d != a[2]) return py::none();
    }
    if (launch == 2 && !index_checks_.empty()) launch = checked_launch(tensors);
    int rc;
    if (nsrc > 0) {
      for (size_t k = 0; k < slots_.size(); ++k) {
        const Slot& s = slots_[k];
        if (s.kind == kSlotBound) continue;  // bound memory (null): Go keeps the captured storage
        fresh[k] = at::empty_strided(s.meta.sizes, s.meta.strides,
                                     at::TensorOptions().dtype(s.meta.dtype).device(device_));
        out_ptrs[k] = fresh[k].data_ptr();
      }
      py::gil_scoped_release nogil;
      rc = hpusim_recipe_launch_copy(handle_, src, nsrc, in_ptrs.data(), static_cast<int>(n), out_ptrs.data(),
                                     static_cast<int>(out_ptrs.size()), reinterpret_cast<int64_t*>(rnd), nrnd);
    } else {
      // The fresh output storages are allocated by the core in the run's own crossing
      // (one call instead of one hpusim_alloc per slot), then wrapped here as
      // at::empty_strided would have made them: ours whether the run succeeded or not.
      for (size_t k = 0; k < slots_.size(); ++k) out_ptrs[k] = nullptr;
      {
        py::gil_scoped_release nogil;
        rc = hpusim_recipe_run_alloc(handle_, launch, device_.index(), in_ptrs.data(), static_cast<int>(n),
                                     out_ptrs.data(), const_cast<int64_t*>(slot_nbytes_.data()),
                                     static_cast<int>(out_ptrs.size()), reinterpret_cast<int64_t*>(rnd), nrnd);
      }
      for (size_t k = 0; k < slots_.size(); ++k) {
        const Slot& s = slots_[k];
        if (s.kind == kSlotBound) continue;
        fresh[k] = fresh_tensor(out_ptrs[k], s);
      }
    }
    if (nsrc > 0 && rc == 2) return aliased();  // nothing ran (hpusim_recipe_launch_copy)
    if (rc != 0) raise_last_error();
    py::list result(outputs_.size());
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const Output& o = outputs_[k];
      switch (o.kind) {
        case kOutConst:
          result[k] = o.value;
          break;
        case kOutSame:
          result[k] = result[o.index];
          break;
        case kOutFresh: {
          const at::Tensor& base = fresh[o.index];
          result[k] = o.whole ? wrap(base) : wrap(view_of(base.storage(), o.meta, o.meta.offset));
          break;
        }
        case kOutInputView: {
          const at::Tensor& x = tensors[o.index];
          if (x.scalar_type() == o.meta.dtype) {
            result[k] = wrap(x.as_strided(o.meta.sizes, o.meta.strides, x.storage_offset() + o.delta));
          } else {
            int64_t off = x.storage_offset() * static_cast<int64_t>(x.element_size()) /
                              static_cast<int64_t>(c10::elementSize(o.meta.dtype)) +
                          o.delta;
            result[k] = wrap(view_of(x.storage(), o.meta, off));
          }
          break;
        }
      }
    }
    return result;
  }

 private:
  // A plain tensor (no autograd view) over storage, as `empty(0).set_(storage, offset,
  // sizes, strides)` makes it, without the two dispatcher calls.
  static at::Tensor view_of(const c10::Storage& storage, const Meta& m, int64_t offset) {
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), kHPUKeys(),
                                                            c10::scalarTypeToTypeMeta(m.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, offset);
    return t;
  }

  static const c10::DispatchKeySet& kHPUKeys() {
    static const c10::DispatchKeySet keys(c10::DispatchKey::HPU);
    return keys;
  }

  // The tensor at::empty_strided(s.meta) makes on this device (hpu_glue.cpp's
  // empty_strided_generic over the HPU allocator), over memory p the core allocated for it
  // (null when the slot holds no bytes), freed as that allocator frees.
  at::Tensor fresh_tensor(void* p, const Slot& s) const {
    static c10::Allocator* const alloc = c10::GetAllocator(c10::DeviceType::HPU);
    static const c10::DeleterFnPtr deleter = alloc->raw_deleter();
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(s.nbytes),
                         c10::DataPtr(p, p, deleter, device_), alloc, /*resizable=*/true);
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), kHPUKeys(),
                                                            c10::scalarTypeToTypeMeta(s.meta.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(s.meta.sizes, s.meta.strides);
    return t;
  }
  static py::object wrap(const at::Tensor& t) { return py::reinterpret_steal<py::object>(THPVariable_Wrap(t)); }

  int64_t handle_;
  c10::Device device_;
  std::vector<Input> inputs_;
  std::vector<std::array<int64_t, 3>> aliases_;
  std::vector<std::array<int64_t, 3>> index_checks_;
  std::vector<Slot> slots_;
  std::vector<int64_t> slot_nbytes_;  // per slot: its nbytes (what the core allocates)
  void add_slot(Slot s) {
    slot_nbytes_.push_back(s.nbytes);
    slots_.push_back(std::move(s));
  }
  std::vector<Output> outputs_;
  // Whether the core holds the copy-in graph of copies_ (made at the first copy_launch).
  bool copy_graph_ready() {
    if (copy_graph_ == kCopyGraphUnset) {
      std::vector<int64_t> frame{static_cast<int64_t>(copies_.size())};
      bool ok = true;
      for (const CopyIn& c : copies_) {
        ok = ok && c.dst.numel() > 0;
        frame.push_back(reinterpret_cast<int64_t>(c.dst.data_ptr()));
        frame.push_back(static_cast<int64_t>(c.dst.scalar_type()));
        frame.push_back(c.dst.dim());
        frame.insert(frame.end(), c.dst.sizes().begin(), c.dst.sizes().end());
        frame.insert(frame.end(), c.dst.strides().begin(), c.dst.strides().end());
      }
      // A static tensor without elements, or one the core refuses: the general path.
      copy_graph_ = ok && !copies_.empty() &&
                            hpusim_recipe_set_copy_in(handle_, frame.data(), static_cast<int>(frame.size())) == 0
                        ? kCopyGraphYes
                        : kCopyGraphNo;
    }
    return copy_graph_ == kCopyGraphYes;
  }
  enum { kCopyGraphUnset, kCopyGraphYes, kCopyGraphNo } copy_graph_ = kCopyGraphUnset;

  struct CopyIn {
    at::Tensor dst;
    const void* storage;  // dst's storage (sources must not share it)
    int op;
    std::vector<int64_t> frame;
    int src_at;  // index of the source pointer in frame
  };
  std::vector<CopyIn> copies_;
};

// wrap_in_hpu_graph's hit path (see the file comment). Python fills it (remember) with the
// graphs it captured or replayed for calls that qualify, and empties it with the module's
// cache (clear); replay returns None, having done nothing, whenever Python must decide:
// keyword arguments, an argument that is not an hpu tensor or is a view, arguments not
// seen, a capture in progress, the profiler on, PT_HPUGRAPH_DISABLE_TENSOR_CACHE=1, or
// sources copy_ must convert.
class ReplayCache {
 public:
  // The graph replayed for calls with args' shapes (Python's input_hash key of such a call:
  // the shapes and the autocast state) is `call` (a RecipeCall with its copy-in set), run
  // over `inputs`, returning `outputs`.
  void remember(py::handle args, py::object call, py::object inputs, py::object outputs) {
    Key key;
    if (!key_of(args, key)) throw py::value_error("ReplayCache: arguments must be hpu tensors, not views");
    RecipeCall* rc = call.cast<RecipeCall*>();
    for (Entry& e : entries_) {
      if (e.key == key) {
        e = Entry{std::move(key), std::move(call), rc, std::move(inputs), std::move(outputs)};
        return;
      }
    }
    entries_.push_back(Entry{std::move(key), std::move(call), rc, std::move(inputs), std::move(outputs)});
  }

  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

  py::object replay(py::handle args, py::handle kwargs) {
    if (entries_.empty() || (!kwargs.is_none() && PyDict_Size(kwargs.ptr()) != 0)) return py::none();
    if (torch::profiler::impl::profilerEnabled() || hpusim_capture_active() != 0) return py::none();
    const char* nocache = std::getenv("PT_HPUGRAPH_DISABLE_TENSOR_CACHE");
    if (nocache != nullptr && std::strcmp(nocache, "1") == 0) return py::none();
    Key key;
    if (!key_of(args, key)) return py::none();
    for (const Entry& e : entries_) {
      if (e.key != key) continue;
      // Held here: a clear() while the GIL is released must not free them under us.
      py::object call = e.call, inputs = e.inputs, outputs = e.outputs;
      RecipeCall* rc = e.rc;
      if (rc->copy_launch(args, inputs, 0, 0).is_none()) return py::none();
      return outputs;
    }
    return py::none();
  }

 private:
  using Key = c10::SmallVector<int64_t, 16>;
  struct Entry {
    Key key;
    py::object call;  // the RecipeCall, kept alive
    RecipeCall* rc;
    py::object inputs, outputs;
  };

  // The key of a call with positional arguments args: the autocast state, then each
  // argument's rank and sizes; false when an argument is not an hpu tensor or is a view.
  static bool key_of(py::handle args, Key& key) {
    if (!PyTuple_Check(args.ptr())) return false;
    const Py_ssize_t n = PyTuple_GET_SIZE(args.ptr());
    key.push_back(at::autocast::is_autocast_enabled(c10::DeviceType::HPU) ? 1 : 0);
    key.push_back(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* x = PyTuple_GET_ITEM(args.ptr(), i);
      if (!THPVariable_Check(x)) return false;
      const at::Tensor& t = THPVariable_Unpack(x);
      if (t.is_view() || t.device().type() != c10::DeviceType::HPU) return false;
      key.push_back(t.dim());
      key.append(t.sizes().begin(), t.sizes().end());
    }
    return true;
  }

  std::vector<Entry> entries_;
};

// run_fast(call, inputs, launch): RecipeCall.run(inputs, launch) as a METH_FASTCALL
// function, without pybind11's dispatcher and argument casters (~0.4 us of a cached
// compiled graph's ~3 us recipe call); fast_runtime's direct path calls it through a
// functools.partial bound to the RecipeCall. Exceptions become the Python ones pybind11
// would raise (torch's c10 error classes as torch translates them: RuntimeError for the
// core's errors, IndexError for class-target checks, ValueError, TypeError, ...).
PyObject* run_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "run_fast(call, inputs, launch)");
    return nullptr;
  }
  try {
    RecipeCall* rc = py::handle(args[0]).cast<RecipeCall*>();
    long launch = PyLong_AsLong(args[2]);
    if (launch == -1 && PyErr_Occurred()) return nullptr;
    return rc->run(args[1], static_cast<int>(launch), 0, 0).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::cast_error& e) {  // call is not a RecipeCall: pybind11's dispatcher says TypeError
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
  } catch (const c10::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyMethodDef run_fast_def = {"run_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run_fast)),
                            METH_FASTCALL, "run_fast(call, inputs, launch): RecipeCall.run(inputs, launch)"};

}  // namespace hpusim_recipe

PYBIND11_MODULE(_recipe_C, m) {
  namespace py = pybind11;
  using hpusim_recipe::RecipeCall;
  using hpusim_recipe::ReplayCache;
  m.doc() = "hpusim's recipe runs: input checks, output allocation and the Go call in C++";
  py::class_<RecipeCall>(m, "RecipeCall")
      .def(py::init<int64_t, int>(), py::arg("handle"), py::arg("device"))
      .def("add_tensor_input", &RecipeCall::add_tensor_input)
      .def("add_value_input", &RecipeCall::add_value_input)
      .def("add_alias_check", &RecipeCall::add_alias_check)
      .def("add_index_check", &RecipeCall::add_index_check)
      .def("add_slot_bound", &RecipeCall::add_slot_bound)
      .def("add_slot_bytes", &RecipeCall::add_slot_bytes)
      .def("add_slot_like", &RecipeCall::add_slot_like)
      .def("add_out_const", &RecipeCall::add_out_const)
      .def("add_out_input_view", &RecipeCall::add_out_input_view)
      .def("add_out_fresh", &RecipeCall::add_out_fresh)
      .def("add_out_same", &RecipeCall::add_out_same)
      .def("add_copy_in", &RecipeCall::add_copy_in)
      .def("copy_launch", &RecipeCall::copy_launch, py::arg("srcs"), py::arg("inputs"), py::arg("rnd") = 0,
           py::arg("nrnd") = 0)
      .def("release", &RecipeCall::release)
      .def("run", &RecipeCall::run, py::arg("inputs"), py::arg("launch"), py::arg("rnd") = 0, py::arg("nrnd") = 0);
  py::class_<ReplayCache>(m, "ReplayCache")
      .def(py::init<>())
      .def("remember", &ReplayCache::remember, py::arg("args"), py::arg("call"), py::arg("inputs"),
           py::arg("outputs"))
      .def("clear", &ReplayCache::clear)
      .def("__len__", &ReplayCache::size)
      .def("replay", &ReplayCache::replay, py::arg("args"), py::arg("kwargs"));
  PyObject* fn = PyCFunction_New(&hpusim_recipe::run_fast_def, nullptr);
  if (fn == nullptr) throw py::error_already_set();
  m.add_object("run_fast", py::reinterpret_steal<py::object>(fn));
}
