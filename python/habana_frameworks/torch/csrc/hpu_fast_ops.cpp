// C++ kernels at the HPU key for the hottest elementwise ops and matrix products.
//
// Every other op reaches the Python boxed fallback (_ops/registry.py `hpu_kernel`), which
// costs ~10 us a call in dispatch, lowering and ctypes: for the small ops torch.optim and
// the reference models issue hundreds of times a step, that is most of the host's time.
// These kernels serve the common case of such an op, float32 or bfloat16 hpu operands of
// the output's dtype (and Python scalars) that broadcast to the output, and pass the Go
// core exactly the frame the Python lowering (_ops/elementwise.py `ew`) builds for it: same
// Go op, operands, scalar dtypes and parameters, so results are bit for bit the same.
// Any other call is redispatched to the Python fallback, which is also registered at the
// otherwise unused PrivateUse3 key for this purpose: its checks, promotion, errors and
// CPU fallback stay in one place.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/ops/_copy_from_ops.h>
#include <ATen/ops/_local_scalar_dense_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

extern "C" {
int hpusim_op_id(char* name);
int hpusim_run(int op, int64_t* desc, int ndesc, double* fl, int nf);
int hpusim_run_labeled(int op, int64_t* desc, int ndesc, double* fl, int nf, char* label);
int hpusim_last_error(char* buf, int n);
int hpusim_set_threads(int n);
}

namespace hpusim_fast {

// Where a call the fast path does not serve goes: the Python fallback's second home.
static const c10::DispatchKeySet kPython(c10::DispatchKey::PrivateUse3);

// HPUSIM_FAST_OPS=0 sends every call to the Python lowerings (for A/B and debugging).
static std::atomic<bool> g_enabled{[] {
  const char* v = std::getenv("HPUSIM_FAST_OPS");
  return v == nullptr || std::strcmp(v, "0") != 0;
}()};

struct FastOp {
  const char* aten;  // schema name, as registry.native_counts() reports it
  const char* goop;  // the Go op
  std::atomic<int> id{-2};  // the Go op id; -2 not looked up yet, -1 unknown to the core
  std::atomic<int64_t> calls{0};
};

enum Op {
  kAdd, kSub, kMul, kDiv, kLerp, kAddcmul, kAddcdiv,
  kExp, kLog, kLog2, kLog1p, kExpm1, kSqrt, kRsqrt, kSin, kCos, kErf, kReciprocal,
  kSigmoid, kTanh, kNeg, kAbs, kMm, kBmm, kAddmm,
  kRelu, kThresholdBackward, kCopyFrom, kFill, kLocalScalarDense, kSum,
  kSoftmax, kLogSoftmax, kSoftmaxBackward, kLogSoftmaxBackward, kNllForward, kNllBackward,
  kLayerNorm, kLayerNormBackward, kGelu, kGeluBackward, kMaskedFill, kMaskedFillOut, kZero, kNumOps
};

static FastOp g_ops[kNumOps] = {
    {"aten::add", "ew.add"},         {"aten::sub", "ew.add"},
    {"aten::mul", "ew.mul"},         {"aten::div", "ew.div"},
    {"aten::lerp", "ew.lerp"},       {"aten::addcmul", "ew.addcmul"},
    {"aten::addcdiv", "ew.addcdiv"}, {"aten::exp", "ew.exp"},
    {"aten::log", "ew.log"},         {"aten::log2", "ew.log2"},
    {"aten::log1p", "ew.log1p"},     {"aten::expm1", "ew.expm1"},
    {"aten::sqrt", "ew.sqrt"},       {"aten::rsqrt", "ew.rsqrt"},
    {"aten::sin", "ew.sin"},         {"aten::cos", "ew.cos"},
    {"aten::erf", "ew.erf"},         {"aten::reciprocal", "ew.reciprocal"},
    {"aten::sigmoid", "ew.sigmoid"}, {"aten::tanh", "ew.tanh"},
    {"aten::neg", "ew.neg"},         {"aten::abs", "ew.abs"},
    {"aten::mm", "bgemm"},           {"aten::bmm", "bgemm"},
    {"aten::addmm", "bgemm"},
    {"aten::relu", "ew.relu"},       {"aten::threshold_backward", "ew.threshold_backward"},
    {"aten::_copy_from", "copy"},    {"aten::fill_", "fill"},
    {"aten::_local_scalar_dense", "copy"}, {"aten::sum", "red.sum"},
    {"aten::_softmax", "red.softmax"},  {"aten::_log_softmax", "red.softmax"},
    {"aten::_softmax_backward_data", "red.softmax_backward"},
    {"aten::_log_softmax_backward_data", "red.softmax_backward"},
    {"aten::nll_loss_forward", "loss.nll_forward"}, {"aten::nll_loss_backward", "loss.nll_backward"},
    {"aten::native_layer_norm", "layer_norm_fwd"}, {"aten::native_layer_norm_backward", "layer_norm_bwd"},
    {"aten::gelu", "ew.gelu"},       {"aten::gelu_backward", "ew.gelu_backward"},
    {"aten::masked_fill_", "ew.where"}, {"aten::masked_fill", "ew.where"},
    {"aten::zero_", "fill"},
};

static int go_id(FastOp& op) {
  int id = op.id.load(std::memory_order_relaxed);
  if (id == -2) {
    id = hpusim_op_id(const_cast<char*>(op.goop));
    op.id.store(id < 0 ? -1 : id, std::memory_order_relaxed);
  }
  return id;
}

constexpr int kMaxDim = 12;
constexpr int kMaxOperands = 4;  // the output and up to three inputs
constexpr int kFrameLen = 1 + kMaxOperands * (3 + 2 * kMaxDim) + 2;

// A Python number operand, in the dtype the lowering converts it to.
struct HostScalar {
  float f32;
  int64_t i64;
  uint16_t bf16;
};

// The Go kernels use as many workers as torch has intra-op threads (torch.set_num_threads,
// OMP_NUM_THREADS), as the bridge's host-side work does; the count is read on the thread
// running the op (as torch's own CPU kernels read it) and passed on when it changes.
inline void sync_threads() {
  static std::atomic<int> last{0};
  const int n = at::get_num_threads();
  if (n != last.load(std::memory_order_relaxed)) {
    last.store(n, std::memory_order_relaxed);
    hpusim_set_threads(n);
  }
}

// The call frame of hpusim_run (see _native.run): tensor count, then per tensor its data
// pointer, dtype, rank, sizes and strides; then the int arguments. Host scalars live here
// too, so their pointers stay valid through the call (the Go core copies them at record).
struct Frame {
  int64_t v[kFrameLen];
  int n = 1;
  HostScalar host[kMaxOperands];
  int nhost = 0;

  Frame() { v[0] = 0; }

  void add(const void* ptr, c10::ScalarType dt, at::IntArrayRef sizes, const int64_t* strides) {
    v[n++] = reinterpret_cast<int64_t>(ptr);
    v[n++] = static_cast<int64_t>(dt);
    v[n++] = static_cast<int64_t>(sizes.size());
    for (int64_t s : sizes) v[n++] = s;
    for (size_t i = 0; i < sizes.size(); i++) v[n++] = strides[i];
    v[0]++;
  }

  // Runs Go op `id` on this frame; a Go error becomes torch's RuntimeError.
  // label: Call.Label (a lazy node's exception class and aten op, "IndexError:nll_loss");
  // with it, an eager error the core does not class is an IndexError whose message drops
  // the Go op's "<op>: " prefix, as the Python lowering of a labelled op raises it.
  void run(int id, double* fl, int nf, const char* label = nullptr, const char* goop = nullptr) {
    sync_threads();
    const int rc = label != nullptr ? hpusim_run_labeled(id, v, n, fl, nf, const_cast<char*>(label))
                                    : hpusim_run(id, v, n, fl, nf);
    if (rc != 0) {
      char buf[1024];
      buf[0] = 0;
      hpusim_last_error(buf, sizeof(buf));
      // A lazy graph's failure names the exception class CPU raises (bridge/nodeerr.go):
      // an input poisoned by an out-of-range index is an IndexError, as on CPU.
      static const char kIndex[] = "IndexError: ";
      if (std::strncmp(buf, kIndex, sizeof(kIndex) - 1) == 0) {
        TORCH_CHECK_INDEX(false, buf + sizeof(kIndex) - 1);
      }
      static const char kRuntime[] = "RuntimeError: ";
      if (std::strncmp(buf, kRuntime, sizeof(kRuntime) - 1) == 0) {
        TORCH_CHECK(false, buf + sizeof(kRuntime) - 1);
      }
      if (label != nullptr && goop != nullptr) {
        const size_t k = std::strlen(goop);
        const bool prefixed = std::strncmp(buf, goop, k) == 0 && buf[k] == ':' && buf[k + 1] == ' ';
        TORCH_CHECK_INDEX(false, prefixed ? buf + k + 2 : buf);
      }
      TORCH_CHECK(false, buf);
    }
  }
};

static bool is_reduced(c10::ScalarType dt) { return dt == c10::kBFloat16; }

// An hpu input that may be read while `out` is written: the same tensor, separate memory,
// or exactly the same elements. Anything else goes to Python (which serves it on the CPU).
static bool overlap_ok(const at::Tensor& out, const at::Tensor& t) {
  if (t.unsafeGetTensorImpl() == out.unsafeGetTensorImpl() || t.numel() == 0) return true;
  if (t.storage().data() != out.storage().data()) return true;
  return t.data_ptr() == out.data_ptr() && t.sizes() == out.sizes() && t.strides() == out.strides();
}

// Runs "ew" over out and inputs as the Python lowering would, or returns false (nothing
// done) for a call only the Python path serves. keep_scalars: a float Python scalar goes
// to Go as float32 and an int one as int64, as ew(keep_scalars=True) passes them; otherwise
// scalars are converted to the output dtype.
// weight: a float32 host scalar appended as the last input (lerp's Scalar weight), if given.
static bool go_dtype(c10::ScalarType dt);

static bool run_ew(Op which, const at::Tensor& out, std::initializer_list<const at::Tensor*> ins,
                   bool keep_scalars, std::initializer_list<double> params = {},
                   std::optional<double> weight = std::nullopt) {
  // torch's check, which its structured kernels make before any backend runs and the
  // Python path (a CPU fallback on copies) would not: an output partly sharing memory
  // with an input raises, on or off the fast path.
  for (const at::Tensor* t : ins) {
    if (t->device() == out.device()) at::assert_no_partial_overlap(out, *t);
  }
  if (!g_enabled.load(std::memory_order_relaxed)) return false;
  FastOp& op = g_ops[which];
  const c10::ScalarType dt = out.scalar_type();
  if ((dt != c10::kFloat && dt != c10::kBFloat16) || !out.device().is_hpu()) return false;
  const int64_t nd = out.dim();
  if (nd > kMaxDim || out.numel() == 0) return false;
  at::IntArrayRef osz = out.sizes(), ost = out.strides();
  for (int64_t i = 0; i < nd; i++) {
    if (ost[i] == 0 && osz[i] > 1) return false;  // Python raises torch's error for this
  }
  // The inputs' broadcast shape must be the output's: Python resizes or raises otherwise.
  int64_t bshape[kMaxDim];
  for (int64_t i = 0; i < nd; i++) bshape[i] = 1;
  int64_t bdim = 0;
  const auto dev = out.device().index();
  // A 0-dim hpu operand of another dtype (x.add_(step) with an int64 step tensor) goes to Go
  // as it is, as elementwise.py's ew passes it for a float32 computation, when a
  // dimensioned operand of the output's dtype makes float32 the common dtype.
  bool dt_dims = false;
  for (const at::Tensor* t : ins) {
    if (t->device().is_hpu() && t->scalar_type() == dt && t->dim() > 0) dt_dims = true;
  }
  for (const at::Tensor* t : ins) {
    if (t->device().is_hpu()) {
      const bool other0 = t->scalar_type() != dt && dt == c10::kFloat && dt_dims && t->dim() == 0 &&
                          t->layout() == c10::kStrided && go_dtype(t->scalar_type()) &&
                          !at::isComplexType(t->scalar_type());
      if (t->device().index() != dev || (t->scalar_type() != dt && !other0) || t->dim() > nd) return false;
      if (!overlap_ok(out, *t)) return false;
      const int64_t td = t->dim(), off = nd - td;
      bdim = std::max(bdim, td);
      for (int64_t j = 0; j < td; j++) {
        int64_t s = t->size(j), &b = bshape[off + j];
        if (s == b || s == 1) continue;
        if (b != 1) return false;  // incompatible shapes: Python raises torch's error
        b = s;
      }
    } else if (t->is_cpu()) {
      if (t->dim() != 0 || !t->unsafeGetTensorImpl()->is_wrapped_number()) return false;
      if (t->scalar_type() != c10::kDouble && t->scalar_type() != c10::kLong) return false;
    } else {
      return false;
    }
  }
  if (bdim != nd) return false;
  for (int64_t i = 0; i < nd; i++) {
    if (bshape[i] != osz[i]) return false;
  }
  const int id = go_id(op);
  if (id < 0) return false;

  Frame f;
  f.add(out.data_ptr(), dt, osz, ost.data());
  int64_t zeros[kMaxDim] = {0};
  for (const at::Tensor* t : ins) {
    if (t->device().is_hpu()) {
      // t.expand(out.shape): stride 0 along broadcast dimensions.
      int64_t st[kMaxDim];
      const int64_t td = t->dim(), off = nd - td;
      for (int64_t i = 0; i < nd; i++) {
        int64_t j = i - off;
        st[i] = (j < 0 || t->size(j) != osz[i]) ? 0 : t->stride(j);
      }
      f.add(t->data_ptr(), t->scalar_type(), osz, st);
      continue;
    }
    HostScalar& h = f.host[f.nhost++];
    const bool is_int = t->scalar_type() == c10::kLong;
    const double d = is_int ? 0.0 : *t->const_data_ptr<double>();
    const int64_t i = is_int ? *t->const_data_ptr<int64_t>() : 0;
    if (keep_scalars && is_int) {
      h.i64 = i;
      f.add(&h.i64, c10::kLong, osz, zeros);
    } else if (keep_scalars || !is_reduced(dt)) {
      h.f32 = is_int ? static_cast<float>(i) : static_cast<float>(d);
      f.add(&h.f32, c10::kFloat, osz, zeros);
    } else {
      // Tensor.to(bfloat16) of a double or int64 goes through float, as here.
      c10::BFloat16 b(is_int ? static_cast<float>(i) : static_cast<float>(d));
      h.bf16 = b.x;
      f.add(&h.bf16, c10::kBFloat16, osz, zeros);
    }
  }
  if (weight) {
    HostScalar& h = f.host[f.nhost++];
    h.f32 = static_cast<float>(*weight);
    f.add(&h.f32, c10::kFloat, osz, zeros);
  }
  f.v[f.n++] = 1;  // one int argument: the compute dtype
  f.v[f.n++] = static_cast<int64_t>(dt);
  double fl[2];
  int nf = 0;
  for (double p : params) fl[nf++] = p;
  f.run(id, nf ? fl : nullptr, nf);
  op.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// A scalar parameter as the Python lowering passes it (elementwise.py _scalar_param):
// rounded to bfloat16 for a bfloat16 op. nullopt for a complex one, and for a bool one
// (torch's meta function raises "Boolean alpha only supported for Boolean results.").
static std::optional<double> param(const at::Scalar& s, c10::ScalarType dt) {
  if (s.isComplex() || s.isBoolean()) return std::nullopt;
  double v = s.toDouble();
  if (is_reduced(dt)) v = static_cast<float>(c10::BFloat16(static_cast<float>(v)));
  return v;
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (auto a = param(alpha, out.scalar_type()); a && run_ew(kAdd, out, {&self, &other}, false, {*a})) {
    return out;
  }
  return at::_ops::add_out::redispatch(kPython, self, other, alpha, out);
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (auto a = param(alpha, out.scalar_type()); a && run_ew(kSub, out, {&self, &other}, false, {-*a})) {
    return out;
  }
  return at::_ops::sub_out::redispatch(kPython, self, other, alpha, out);
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (run_ew(kMul, out, {&self, &other}, true)) return out;
  return at::_ops::mul_out::redispatch(kPython, self, other, out);
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (run_ew(kDiv, out, {&self, &other}, true)) return out;
  return at::_ops::div_out::redispatch(kPython, self, other, out);
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight,
                            at::Tensor& out) {
  // The lowering makes the weight a float32 host scalar (ew keep_scalars).
  if (!weight.isComplex() && run_ew(kLerp, out, {&self, &end}, true, {}, weight.toDouble())) {
    return out;
  }
  return at::_ops::lerp_Scalar_out::redispatch(kPython, self, end, weight, out);
}

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                        const at::Scalar& value, at::Tensor& out) {
  if (!value.isComplex() && run_ew(kAddcmul, out, {&self, &t1, &t2}, false, {value.toDouble()})) {
    return out;
  }
  return at::_ops::addcmul_out::redispatch(kPython, self, t1, t2, value, out);
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                        const at::Scalar& value, at::Tensor& out) {
  if (!value.isComplex() && run_ew(kAddcdiv, out, {&self, &t1, &t2}, false, {value.toDouble()})) {
    return out;
  }
  return at::_ops::addcdiv_out::redispatch(kPython, self, t1, t2, value, out);
}

// ---------------------------------------------------------------- matrix products
// As linalg.py's fast cases: "bgemm" over 3-D views (a 2-D operand unsqueezed at 0), ints
// (naive), floats (alpha, beta), addmm's self expanded to the result and passed only when
// beta != 0. Anything else (a check that fails, another dtype, an out= to resize) is the
// Python path's.

// Appends t (after expand to `shape` when given) unsqueezed to 3-D if it is 2-D.
static void add_3d(Frame& f, const at::Tensor& t, at::IntArrayRef shape = {}) {
  int64_t sz[3], st[3];
  const int64_t td = t.dim();
  if (td == 3) {
    f.add(t.data_ptr(), t.scalar_type(), t.sizes(), t.strides().data());
    return;
  }
  // 2-D: as expand(shape) (stride 0 along broadcast dimensions), then unsqueeze(0).
  for (int i = 0; i < 2; i++) {
    int64_t j = i - (2 - td);
    if (shape.empty()) {
      sz[i + 1] = t.size(i), st[i + 1] = t.stride(i);
    } else {
      sz[i + 1] = shape[i];
      st[i + 1] = (j < 0 || t.size(j) != shape[i]) ? 0 : t.stride(j);
    }
  }
  sz[0] = 1;
  st[0] = sz[1] * st[1];
  f.add(t.data_ptr(), t.scalar_type(), at::IntArrayRef(sz, 3), st);
}

static bool gemm_dtype_ok(const at::Tensor& out, std::initializer_list<const at::Tensor*> ins) {
  const c10::ScalarType dt = out.scalar_type();
  if ((dt != c10::kFloat && dt != c10::kBFloat16) || !out.device().is_hpu()) return false;
  for (const at::Tensor* t : ins) {
    if (t->scalar_type() != dt || t->device() != out.device()) return false;
  }
  return true;
}

static bool run_gemm(Op which, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                     const at::Tensor* self, bool naive, double alpha, double beta) {
  FastOp& op = g_ops[which];
  const int id = go_id(op);
  if (id < 0) return false;
  if (out.numel() != 0) {
    Frame f;
    add_3d(f, out);
    add_3d(f, a);
    add_3d(f, b);
    if (self != nullptr && beta != 0) add_3d(f, *self, out.sizes());
    f.v[f.n++] = 1;
    f.v[f.n++] = naive ? 1 : 0;
    double fl[2] = {alpha, beta};
    f.run(id, fl, 2);
  }
  op.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (g_enabled.load(std::memory_order_relaxed) && self.dim() == 2 && mat2.dim() == 2 &&
      self.size(1) == mat2.size(0) && gemm_dtype_ok(out, {&self, &mat2}) && out.dim() == 2 &&
      out.size(0) == self.size(0) && out.size(1) == mat2.size(1) &&
      run_gemm(kMm, out, self, mat2, nullptr, false, 1.0, 0.0)) {
    return out;
  }
  return at::_ops::mm_out::redispatch(kPython, self, mat2, out);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (g_enabled.load(std::memory_order_relaxed) && self.dim() == 3 && mat2.dim() == 3 &&
      self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1) &&
      gemm_dtype_ok(out, {&self, &mat2}) && out.dim() == 3 && out.size(0) == self.size(0) &&
      out.size(1) == self.size(1) && out.size(2) == mat2.size(2)) {
    // CPU bmm runs its own loop instead of BLAS when one product is this small.
    const bool naive = out.scalar_type() == c10::kFloat && self.size(1) * self.size(2) * mat2.size(2) < 400;
    if (run_gemm(kBmm, out, self, mat2, nullptr, naive, 1.0, 0.0)) return out;
  }
  return at::_ops::bmm_out::redispatch(kPython, self, mat2, out);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (g_enabled.load(std::memory_order_relaxed) && !beta.isComplex() && !alpha.isComplex() &&
      mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0) && self.dim() <= 2 &&
      gemm_dtype_ok(out, {&self, &mat1, &mat2}) && out.dim() == 2 && out.size(0) == mat1.size(0) &&
      out.size(1) == mat2.size(1)) {
    bool bcast = true;  // self expands to the result (trailing-aligned, sizes equal or 1)
    for (int64_t j = self.dim() - 1, i = 1; j >= 0; j--, i--) {
      bcast = bcast && (self.size(j) == out.size(i) || self.size(j) == 1);
    }
    if (bcast && run_gemm(kAddmm, out, mat1, mat2, &self, false, alpha.toDouble(), beta.toDouble())) {
      return out;
    }
  }
  return at::_ops::addmm_out::redispatch(kPython, self, mat1, mat2, beta, alpha, out);
}

// ---------------------------------------------------------------- activations
// relu and threshold_backward as elementwise.py's _relu and _bwd("threshold_backward"):
// ew over the input (and the gradient), output allocated like the input.

at::Tensor relu(const at::Tensor& self) {
  if (g_enabled.load(std::memory_order_relaxed) && self.device().is_hpu() &&
      (self.scalar_type() == c10::kFloat || self.scalar_type() == c10::kBFloat16)) {
    at::Tensor out = at::empty_like(self);
    if (run_ew(kRelu, out, {&self}, false)) return out;
  }
  return at::_ops::relu::redispatch(kPython, self);
}

at::Tensor& relu_(at::Tensor& self) {
  if (g_enabled.load(std::memory_order_relaxed) && run_ew(kRelu, self, {&self}, false)) return self;
  return at::_ops::relu_::redispatch(kPython, self);
}

at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                   const at::Scalar& threshold, at::Tensor& grad_input) {
  if (!threshold.isComplex() &&
      run_ew(kThresholdBackward, grad_input, {&grad_output, &self}, false, {threshold.toDouble()})) {
    return grad_input;
  }
  return at::_ops::threshold_backward_grad_input::redispatch(kPython, grad_output, self, threshold, grad_input);
}

// ---------------------------------------------------------------- data movement
// As memory_ops.py: the Go "copy" takes any strides and any pair of its dtypes, host or
// device on either side; "fill" writes a scalar. Served: same shapes (no broadcast), at
// most kMaxDim dims, one hpu device, plain strided tensors. A host int64 source into an
// int64 destination goes to Python while int64 support is off (its int32-range check).

static bool go_dtype(c10::ScalarType dt) {
  switch (dt) {
    case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt: case c10::kLong:
    case c10::kHalf: case c10::kFloat: case c10::kDouble: case c10::kBool: case c10::kBFloat16:
      return true;
    default:
      return false;
  }
}

static bool plain(const at::Tensor& t) {
  return t.layout() == c10::kStrided && (t.is_cpu() || t.device().is_hpu()) && !t.is_conj() && !t.is_neg() &&
         go_dtype(t.scalar_type()) && t.dim() <= kMaxDim;
}

// int64_support.enabled(): PT_ENABLE_INT64_SUPPORT, read at each copy as clients set it
// at run time; unset means on.
static bool int64_enabled() {
  const char* v = std::getenv("PT_ENABLE_INT64_SUPPORT");
  if (v == nullptr) return true;
  std::string s(v);
  const auto b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s != "0" && s != "false" && s != "f" && s != "off" && s != "no";
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // A host int64 tensor into an hpu int64 one while int64 support is off: Python checks
  // its values fit int32 (int64_support.check_host_to_device).
  const bool int64_check = dst.scalar_type() == c10::kLong && self.scalar_type() == c10::kLong && self.is_cpu();
  if (g_enabled.load(std::memory_order_relaxed) && plain(self) && plain(dst) &&
      (!int64_check || int64_enabled()) && self.sizes() == dst.sizes() &&
      !(self.device().is_hpu() && dst.device().is_hpu() && self.device() != dst.device())) {
    FastOp& op = g_ops[kCopyFrom];
    const int id = go_id(op);
    if (id >= 0) {
      if (dst.numel() != 0) {
        Frame f;
        f.add(dst.data_ptr(), dst.scalar_type(), dst.sizes(), dst.strides().data());
        f.add(self.data_ptr(), self.scalar_type(), self.sizes(), self.strides().data());
        f.v[f.n++] = 0;  // no int arguments
        f.run(id, nullptr, 0);
      }
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return dst;
    }
  }
  return at::_ops::_copy_from::redispatch(kPython, self, dst, non_blocking);
}

// fill_'s Go op over self, as memory_ops.py's fill_value; false: the Python path's call.
static bool fill_fast(Op which, at::Tensor& self, const at::Scalar& value) {
  if (g_enabled.load(std::memory_order_relaxed) && !value.isComplex() && self.device().is_hpu() && plain(self)) {
    FastOp& op = g_ops[which];
    const int id = go_id(op);
    if (id >= 0) {
      if (self.numel() != 0) {
        const bool float_dt = at::isFloatingType(self.scalar_type());
        Frame f;
        f.add(self.data_ptr(), self.scalar_type(), self.sizes(), self.strides().data());
        double fl;
        f.v[f.n++] = 2;
        if (value.isBoolean() || (value.isIntegral(false) && !float_dt)) {
          f.v[f.n++] = 1, f.v[f.n++] = value.toLong(), fl = 0.0;  // exact integer fill
        } else if (value.isIntegral(false)) {
          f.v[f.n++] = 1, f.v[f.n++] = value.toLong(), fl = static_cast<double>(value.toLong());
        } else {
          f.v[f.n++] = 0, f.v[f.n++] = 0, fl = value.toDouble();
        }
        f.run(id, &fl, 1);
      }
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

at::Tensor& fill_scalar_(at::Tensor& self, const at::Scalar& value) {
  if (fill_fast(kFill, self, value)) return self;
  return at::_ops::fill__Scalar::redispatch(kPython, self, value);
}

// zero_ (and so zeros_like, new_zeros, zero_grad's in-place form): memory_ops.py's
// fill_value(self, 0), without the Python fallback's ~30 us.
at::Tensor& zero_(at::Tensor& self) {
  if (fill_fast(kZero, self, at::Scalar(int64_t{0}))) return self;
  return at::_ops::zero_::redispatch(kPython, self);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  if (g_enabled.load(std::memory_order_relaxed) && self.device().is_hpu() && plain(self) && self.numel() == 1) {
    FastOp& op = g_ops[kLocalScalarDense];
    const int id = go_id(op);
    if (id >= 0) {
      at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
      Frame f;
      f.add(host.data_ptr(), host.scalar_type(), {}, nullptr);
      f.add(self.data_ptr(), self.scalar_type(), {}, nullptr);  // self.reshape(()): one element
      f.v[f.n++] = 0;
      f.run(id, nullptr, 0);
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return at::_ops::_local_scalar_dense::call(host);
    }
  }
  return at::_ops::_local_scalar_dense::redispatch(kPython, self);
}

// ---------------------------------------------------------------- reductions
// sum over dims into a given out= of the input's floating dtype, as reduction.py's
// _reduce(SUM) with a direct output: "red.sum" over the input as it is (torch's CPU
// summation order), writing out viewed with the reduced dims kept as size 1.

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const c10::ScalarType dt = self.scalar_type();
  const int64_t nd = self.dim();
  if (g_enabled.load(std::memory_order_relaxed) && (dt == c10::kFloat || dt == c10::kBFloat16) &&
      (!dtype || *dtype == dt) && self.device().is_hpu() && out.device() == self.device() &&
      out.scalar_type() == dt && nd >= 1 && nd <= kMaxDim && plain(self) && out.is_contiguous() &&
      !(out.numel() != 0 && self.numel() != 0 && out.storage().data() == self.storage().data())) {
    bool red[kMaxDim] = {false};
    bool ok = true;
    if (!dim || dim->empty()) {
      for (int64_t d = 0; d < nd; d++) red[d] = true;
    } else {
      for (int64_t d : *dim) {
        if (d < -nd || d >= nd) { ok = false; break; }  // Python raises torch's IndexError
        d = d < 0 ? d + nd : d;
        if (red[d]) { ok = false; break; }
        red[d] = true;
      }
    }
    // out must already have the result's shape (the structured kernel allocated it).
    int64_t keep[kMaxDim], kst[kMaxDim];
    if (ok) {
      int64_t j = 0;
      for (int64_t d = 0; d < nd; d++) {
        keep[d] = red[d] ? 1 : self.size(d);
        if (keepdim || !red[d]) ok = ok && j < out.dim() && out.size(j++) == keep[d];
      }
      ok = ok && j == out.dim();
      int64_t st = 1;
      for (int64_t d = nd - 1; d >= 0; d--) kst[d] = st, st *= keep[d];
    }
    FastOp& op = g_ops[kSum];
    const int id = ok ? go_id(op) : -1;
    if (id >= 0) {
      if (out.numel() != 0) {
        Frame f;
        f.add(out.data_ptr(), dt, at::IntArrayRef(keep, nd), kst);
        f.add(self.data_ptr(), dt, self.sizes(), self.strides().data());
        f.v[f.n++] = 2 + nd;
        f.v[f.n++] = 0;  // not a mean
        f.v[f.n++] = at::get_num_threads();
        for (int64_t d = 0; d < nd; d++) f.v[f.n++] = red[d] ? 1 : 0;
        f.run(id, nullptr, 0);
      }
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
  }
  return at::_ops::sum_IntList_out::redispatch(kPython, self, dim, keepdim, dtype, out);
}

// ---------------------------------------------------------------- softmax, losses, norms
// As reduction.py's _softmax_impl/_softmax_bwd_impl, nll_loss_forward/backward and
// nn_ops.py's native_layer_norm(_backward): the same Go op over the same frame, for the
// common case (float32/bfloat16 hpu tensors, contiguous, the last dim for softmax, the
// outputs torch's structured kernel allocated). Every other call is the Python path's.

static bool fast_float(const at::Tensor& t) {
  const c10::ScalarType dt = t.scalar_type();
  return (dt == c10::kFloat || dt == c10::kBFloat16) && t.device().is_hpu();
}

// t is an hpu tensor on dev of dtype dt.
static bool on(const at::Tensor& t, const c10::Device& dev, c10::ScalarType dt) {
  return t.defined() && t.device() == dev && t.scalar_type() == dt;
}

static bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() != 0 && b.numel() != 0 && a.storage().data() == b.storage().data();
}

// (rows, last dim) of a contiguous tensor of at least one dim: its view(-1, N).
static void add_rows(Frame& f, const at::Tensor& t) {
  const int64_t n = t.size(-1);
  const int64_t sz[2] = {t.numel() / n, n};
  const int64_t st[2] = {n, 1};
  f.add(t.data_ptr(), t.scalar_type(), at::IntArrayRef(sz, 2), st);
}

// A tensor of numel n as a 1-D view of length n (t.view(-1) of a contiguous t).
static void add_flat(Frame& f, const at::Tensor& t) {
  const int64_t sz[1] = {t.numel()};
  const int64_t st[1] = {1};
  f.add(t.data_ptr(), t.scalar_type(), at::IntArrayRef(sz, 1), st);
}

// softmax/log_softmax along the last dim of a contiguous input into a contiguous out=.
static bool softmax_fast(Op which, bool log, const at::Tensor& self, int64_t dim, bool half_to_float,
                         const at::Tensor& out) {
  if (!g_enabled.load(std::memory_order_relaxed) || half_to_float || !fast_float(self)) return false;
  const int64_t nd = self.dim();
  if (nd < 1 || nd > kMaxDim || (dim != -1 && dim != nd - 1)) return false;
  if (!self.is_contiguous() || !on(out, self.device(), self.scalar_type()) || out.sizes() != self.sizes() ||
      !out.is_contiguous() || shares_storage(out, self)) {
    return false;
  }
  FastOp& op = g_ops[which];
  const int id = go_id(op);
  if (id < 0) return false;
  if (out.numel() != 0) {
    Frame f;
    add_rows(f, out);
    add_rows(f, self);
    f.v[f.n++] = 3;
    f.v[f.n++] = log ? 1 : 0;
    f.v[f.n++] = 1;  // the softmax dim is the last
    f.v[f.n++] = 1;  // inner size
    f.run(id, nullptr, 0);
  }
  op.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (softmax_fast(kSoftmax, false, self, dim, half_to_float, out)) return out;
  return at::_ops::_softmax_out::redispatch(kPython, self, dim, half_to_float, out);
}

at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (softmax_fast(kLogSoftmax, true, self, dim, half_to_float, out)) return out;
  return at::_ops::_log_softmax_out::redispatch(kPython, self, dim, half_to_float, out);
}

static bool softmax_bwd_fast(Op which, bool log, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                             c10::ScalarType input_dtype, const at::Tensor& gi) {
  if (!g_enabled.load(std::memory_order_relaxed) || !fast_float(output)) return false;
  const c10::ScalarType dt = output.scalar_type();
  const int64_t nd = output.dim();
  if (input_dtype != dt || nd < 1 || nd > kMaxDim || (dim != -1 && dim != nd - 1)) return false;
  if (!on(grad, output.device(), dt) || grad.sizes() != output.sizes() || !grad.is_contiguous() ||
      !output.is_contiguous() || !on(gi, output.device(), dt) || gi.sizes() != output.sizes() ||
      !gi.is_contiguous() || shares_storage(gi, grad) || shares_storage(gi, output)) {
    return false;
  }
  FastOp& op = g_ops[which];
  const int id = go_id(op);
  if (id < 0) return false;
  if (gi.numel() != 0) {
    Frame f;
    add_rows(f, gi);
    add_rows(f, grad);
    add_rows(f, output);
    f.v[f.n++] = 2;
    f.v[f.n++] = log ? 1 : 0;
    f.v[f.n++] = 1;  // the softmax dim is the last
    f.run(id, nullptr, 0);
  }
  op.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input) {
  if (softmax_bwd_fast(kSoftmaxBackward, false, grad_output, output, dim, input_dtype, grad_input)) {
    return grad_input;
  }
  return at::_ops::_softmax_backward_data_out::redispatch(kPython, grad_output, output, dim, input_dtype,
                                                          grad_input);
}

at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input) {
  if (softmax_bwd_fast(kLogSoftmaxBackward, true, grad_output, output, dim, input_dtype, grad_input)) {
    return grad_input;
  }
  return at::_ops::_log_softmax_backward_data_out::redispatch(kPython, grad_output, output, dim, input_dtype,
                                                              grad_input);
}

// nll_loss over (N, C) scores and (N,) int64 targets, weight absent or (C,) of the scores'
// dtype. A target out of range is the Go kernel's error, raised as CPU's IndexError.
static bool nll_args_ok(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                        int64_t reduction) {
  if (!g_enabled.load(std::memory_order_relaxed) || !fast_float(self) || self.dim() != 2 || self.numel() == 0) {
    return false;
  }
  if (reduction < 0 || reduction > 2 || target.device() != self.device() || target.scalar_type() != c10::kLong ||
      target.dim() != 1 || target.size(0) != self.size(0)) {
    return false;
  }
  if (weight && weight->defined()) {
    const at::Tensor& w = *weight;
    if (!on(w, self.device(), self.scalar_type()) || w.dim() != 1 || w.size(0) != self.size(1)) return false;
  }
  return true;
}

static void add_vec(Frame& f, const at::Tensor& t) {  // a 1-D tensor as it is, a 0-dim one as (1,)
  if (t.dim() == 0) {
    add_flat(f, t);
  } else {
    f.add(t.data_ptr(), t.scalar_type(), t.sizes(), t.strides().data());
  }
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& output, at::Tensor& total_weight) {
  const bool has_w = weight && weight->defined();
  if (nll_args_ok(self, target, weight, reduction) && on(output, self.device(), self.scalar_type()) &&
      on(total_weight, self.device(), self.scalar_type()) && total_weight.dim() == 0 &&
      (reduction == 0 ? output.dim() == 1 && output.size(0) == self.size(0) : output.dim() == 0) &&
      !shares_storage(output, total_weight)) {
    bool apart = true;  // the outputs share no memory with the inputs
    for (const at::Tensor* o : {&output, &total_weight}) {
      apart = apart && !shares_storage(*o, self) && !shares_storage(*o, target) && !(has_w && shares_storage(*o, *weight));
    }
    FastOp& op = g_ops[kNllForward];
    const int id = apart ? go_id(op) : -1;
    if (id >= 0) {
      Frame f;
      add_vec(f, output);
      add_flat(f, total_weight);
      f.add(self.data_ptr(), self.scalar_type(), self.sizes(), self.strides().data());
      f.add(target.data_ptr(), target.scalar_type(), target.sizes(), target.strides().data());
      add_vec(f, has_w ? *weight : total_weight);
      f.v[f.n++] = 3;
      f.v[f.n++] = reduction;
      f.v[f.n++] = ignore_index;
      f.v[f.n++] = has_w ? 1 : 0;
      f.run(id, nullptr, 0, "IndexError:nll_loss", op.goop);
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return {output, total_weight};
    }
  }
  return at::_ops::nll_loss_forward_output::redispatch(kPython, self, target, weight, reduction, ignore_index,
                                                       output, total_weight);
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const bool has_w = weight && weight->defined();
  if (nll_args_ok(self, target, weight, reduction) && on(grad_input, self.device(), self.scalar_type()) &&
      grad_input.sizes() == self.sizes() && grad_input.is_contiguous() &&
      on(grad_output, self.device(), self.scalar_type()) && grad_output.dim() <= 1 &&
      on(total_weight, self.device(), self.scalar_type()) && total_weight.dim() == 0 &&
      !shares_storage(grad_input, grad_output) && !shares_storage(grad_input, self) &&
      !shares_storage(grad_input, target) && !shares_storage(grad_input, total_weight) &&
      !(has_w && shares_storage(grad_input, *weight))) {
    FastOp& op = g_ops[kNllBackward];
    const int id = go_id(op);
    if (id >= 0) {
      Frame f;
      f.add(grad_input.data_ptr(), grad_input.scalar_type(), grad_input.sizes(), grad_input.strides().data());
      add_vec(f, grad_output);
      f.add(target.data_ptr(), target.scalar_type(), target.sizes(), target.strides().data());
      add_vec(f, has_w ? *weight : total_weight);
      add_flat(f, total_weight);
      f.v[f.n++] = 3;
      f.v[f.n++] = reduction;
      f.v[f.n++] = ignore_index;
      f.v[f.n++] = has_w ? 1 : 0;
      f.run(id, nullptr, 0, "IndexError:nll_loss_backward", op.goop);
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return grad_input;
    }
  }
  return at::_ops::nll_loss_backward_grad_input::redispatch(kPython, grad_output, self, target, weight, reduction,
                                                            ignore_index, total_weight, grad_input);
}

// layer_norm over the trailing normalized_shape of a contiguous input, weight and bias
// absent or of the input's shape and dtype, or float32 for a bfloat16 input (then the
// statistics are float32 too: the Python path's).
static bool ln_shape(const at::Tensor& input, c10::SymIntArrayRef normalized_shape, int64_t& M, int64_t& D) {
  const int64_t n = static_cast<int64_t>(normalized_shape.size()), axis = input.dim() - n;
  if (n < 1 || axis < 0 || input.dim() > kMaxDim) return false;
  D = 1;
  for (int64_t i = 0; i < n; i++) {
    auto s = normalized_shape[i].maybe_as_int();
    if (!s || *s != input.size(axis + i)) return false;
    D *= *s;
  }
  if (D == 0 || input.numel() == 0) return false;
  M = input.numel() / D;
  return true;
}

// The dtype of layer norm's parameters and statistics: the input's, or float32 for a
// bfloat16 input whose present parameters are float32 (autocast's layer_norm), as in
// nn_ops.py. kUndefined when the parameters disagree (the Python path's case).
static c10::ScalarType ln_param_dtype(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                      const std::optional<at::Tensor>& bias) {
  c10::ScalarType pdt = c10::ScalarType::Undefined;
  for (const auto* p : {&weight, &bias}) {
    if (!*p || !(*p)->defined()) continue;
    if (pdt == c10::ScalarType::Undefined) pdt = (**p).scalar_type();
    if ((**p).scalar_type() != pdt) return c10::ScalarType::Undefined;
  }
  if (pdt == c10::ScalarType::Undefined || pdt == input.scalar_type()) return input.scalar_type();
  return input.scalar_type() == c10::kBFloat16 && pdt == c10::kFloat ? c10::kFloat : c10::ScalarType::Undefined;
}

static bool ln_param_ok(const std::optional<at::Tensor>& p, const at::Tensor& input, int64_t axis,
                        c10::ScalarType pdt) {
  if (!p || !p->defined()) return true;
  if (!on(*p, input.device(), pdt) || !p->is_contiguous() || p->dim() != input.dim() - axis) {
    return false;
  }
  for (int64_t i = 0; i < p->dim(); i++) {
    if (p->size(i) != input.size(axis + i)) return false;
  }
  return true;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::SymIntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  int64_t M = 0, D = 0;
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  const c10::ScalarType pdt = ln_param_dtype(input, weight, bias);
  if (g_enabled.load(std::memory_order_relaxed) && fast_float(input) && input.is_contiguous() &&
      pdt != c10::ScalarType::Undefined && ln_shape(input, normalized_shape, M, D) &&
      ln_param_ok(weight, input, axis, pdt) && ln_param_ok(bias, input, axis, pdt)) {
    FastOp& op = g_ops[kLayerNorm];
    const int id = go_id(op);
    if (id >= 0) {
      const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
      at::Tensor out = at::empty(input.sizes(), input.options());
      std::vector<int64_t> stat(input.sizes().begin(), input.sizes().begin() + axis);
      stat.resize(input.dim(), 1);
      at::Tensor mean = at::empty(stat, input.options().dtype(pdt)), rstd = at::empty(stat, input.options().dtype(pdt));
      Frame f;
      const int64_t sz[2] = {M, D}, st[2] = {D, 1};
      f.add(out.data_ptr(), out.scalar_type(), at::IntArrayRef(sz, 2), st);
      f.add(input.data_ptr(), input.scalar_type(), at::IntArrayRef(sz, 2), st);
      add_flat(f, mean);
      add_flat(f, rstd);
      if (has_w) add_flat(f, *weight);
      if (has_b) add_flat(f, *bias);
      f.v[f.n++] = 1;
      f.v[f.n++] = 3 | (has_w ? 4 : 0) | (has_b ? 8 : 0);
      f.run(id, &eps, 1);
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return {out, mean, rstd};
    }
  }
  return at::_ops::native_layer_norm::redispatch(kPython, input, normalized_shape, weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  int64_t M = 0, D = 0;
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  const c10::ScalarType pdt = ln_param_dtype(input, weight, bias);
  if (g_enabled.load(std::memory_order_relaxed) && fast_float(input) && input.is_contiguous() &&
      pdt != c10::ScalarType::Undefined && ln_shape(input, normalized_shape, M, D) &&
      on(grad_out, input.device(), input.scalar_type()) && grad_out.sizes() == input.sizes() &&
      grad_out.is_contiguous() && on(mean, input.device(), pdt) && mean.is_contiguous() && mean.numel() == M &&
      on(rstd, input.device(), pdt) && rstd.is_contiguous() && rstd.numel() == M &&
      ln_param_ok(weight, input, axis, pdt) && ln_param_ok(bias, input, axis, pdt)) {
    FastOp& op = g_ops[kLayerNormBackward];
    const int id = go_id(op);
    if (id >= 0) {
      const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
      const auto pshape = input.sizes().slice(axis);
      at::Tensor gi, gw, gb;
      if (output_mask[0]) gi = at::empty(input.sizes(), input.options());
      if (output_mask[1] && has_w) gw = at::empty(pshape, weight->options());
      if (output_mask[2] && has_b) gb = at::empty(pshape, bias->options());
      Frame f;
      const int64_t sz[2] = {M, D}, st[2] = {D, 1};
      f.add(grad_out.data_ptr(), grad_out.scalar_type(), at::IntArrayRef(sz, 2), st);
      f.add(input.data_ptr(), input.scalar_type(), at::IntArrayRef(sz, 2), st);
      add_flat(f, mean);
      add_flat(f, rstd);
      int64_t mask = 0;
      if (gi.defined()) f.add(gi.data_ptr(), gi.scalar_type(), at::IntArrayRef(sz, 2), st), mask |= 1;
      if (gw.defined()) add_flat(f, gw), mask |= 2;
      if (gb.defined()) add_flat(f, gb), mask |= 4;
      if (has_w) add_flat(f, *weight), mask |= 8;
      f.v[f.n++] = 1;
      f.v[f.n++] = mask;
      f.run(id, nullptr, 0);
      op.calls.fetch_add(1, std::memory_order_relaxed);
      return {gi, gw, gb};
    }
  }
  return at::_ops::native_layer_norm_backward::redispatch(kPython, grad_out, input, normalized_shape, mean, rstd,
                                                          weight, bias, output_mask);
}

// ---------------------------------------------------------------- gelu, masked_fill_
// elementwise.py's _gelu and _bwd("gelu_backward"): ew with the approximation as parameter.

static std::optional<double> gelu_param(c10::string_view approximate) {
  if (approximate == "none") return 0.0;
  if (approximate == "tanh") return 1.0;
  return std::nullopt;  // Python raises torch's error
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  if (auto a = gelu_param(approximate); a && run_ew(kGelu, out, {&self}, false, {*a})) return out;
  return at::_ops::gelu_out::redispatch(kPython, self, approximate, out);
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  if (auto a = gelu_param(approximate); a && run_ew(kGeluBackward, grad_input, {&grad_output, &self}, false, {*a})) {
    return grad_input;
  }
  return at::_ops::gelu_backward_grad_input::redispatch(kPython, grad_output, self, approximate, grad_input);
}

// masked_fill of a float32 or bfloat16 tensor with a bool mask that broadcasts to it:
// ew("where", [mask, value, self], float32) into out (self for masked_fill_), the value
// a float32 host scalar rounded to self's dtype by the kernel's store, as torch's CPU
// kernel converts it (Scalar -> float -> bfloat16). The kernel's select copies self's
// elements and runs one pass where mask, self and out share a contiguous inner block.
// Returns false (nothing written) where the Python lowering must serve the call.
static bool masked_fill_fast(FastOp& op, const at::Tensor& out, const at::Tensor& self, const at::Tensor& mask,
                             const at::Scalar& value) {
  const int64_t nd = self.dim();
  const c10::ScalarType dt = self.scalar_type();
  bool ok = g_enabled.load(std::memory_order_relaxed) && !value.isComplex() && self.device().is_hpu() &&
            (dt == c10::kFloat || dt == c10::kBFloat16) && self.numel() != 0 && nd <= kMaxDim &&
            mask.device() == self.device() && mask.scalar_type() == c10::kBool && mask.dim() <= nd &&
            !shares_storage(mask, self) && !shares_storage(mask, out);
  for (int64_t i = 0; ok && i < nd; i++) ok = !(out.stride(i) == 0 && out.size(i) > 1);
  int64_t mst[kMaxDim];
  for (int64_t i = 0, off = nd - (ok ? mask.dim() : 0); ok && i < nd; i++) {
    const int64_t j = i - off;
    if (j < 0) {
      mst[i] = 0;
    } else if (mask.size(j) == self.size(i)) {
      mst[i] = mask.stride(j);
    } else {
      ok = mask.size(j) == 1;
      mst[i] = 0;
    }
  }
  const int id = ok ? go_id(op) : -1;
  if (id < 0) return false;
  float v;
  if (value.isBoolean()) {
    v = value.toBool() ? 1.0f : 0.0f;
  } else if (value.isIntegral(false)) {
    v = static_cast<float>(value.toLong());
  } else {
    v = static_cast<float>(value.toDouble());
  }
  const int64_t zeros[kMaxDim] = {0};
  Frame f;
  f.add(out.data_ptr(), dt, out.sizes(), out.strides().data());
  f.add(mask.data_ptr(), c10::kBool, self.sizes(), mst);
  f.add(&v, c10::kFloat, self.sizes(), zeros);
  f.add(self.data_ptr(), dt, self.sizes(), self.strides().data());
  f.v[f.n++] = 1;
  f.v[f.n++] = static_cast<int64_t>(c10::kFloat);
  f.run(id, nullptr, 0);
  op.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  if (masked_fill_fast(g_ops[kMaskedFill], self, self, mask, value)) return self;
  return at::_ops::masked_fill__Scalar::redispatch(kPython, self, mask, value);
}

// masked_fill: torch's CPU kernel fills a contiguous clone of self expanded to the
// broadcast shape; when the mask broadcasts to self's own shape the fast path writes that
// contiguous result in the same pass as the fill.
at::Tensor masked_fill_scalar(const at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  if (g_enabled.load(std::memory_order_relaxed) && self.device().is_hpu() && mask.device() == self.device() &&
      mask.dim() <= self.dim() && self.numel() != 0 &&
      (self.scalar_type() == c10::kFloat || self.scalar_type() == c10::kBFloat16)) {
    at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
    if (masked_fill_fast(g_ops[kMaskedFillOut], out, self, mask, value)) return out;
  }
  return at::_ops::masked_fill_Scalar::redispatch(kPython, self, mask, value);
}

// Unary floating ops: ew(name, [self], dtype) in the lowering.
template <Op which, class AtenOp>
at::Tensor& unary_out(const at::Tensor& self, at::Tensor& out) {
  if (run_ew(which, out, {&self}, false)) return out;
  return AtenOp::redispatch(kPython, self, out);
}

// ---------------------------------------------------------------- functional and in-place forms
// torch reaches a backend's functional and in-place forms of a structured op through a
// generic kernel that runs the op's meta function (a TensorIterator build), allocates the
// result and dispatches to the out= form again: ~1.5 us a call, more than the Go kernel of
// a small tensor. These kernels go to the fast out= work directly for the same common case
// and allocate what torch would: for an elementwise op whose hpu operands are all
// contiguous, one of them of the full broadcast shape, a contiguous result of that shape.
// Anything else redispatches to the generic kernel (at the defer key), as before.

// The result of a functional elementwise op as described above, or undefined.
static at::Tensor ew_result(std::initializer_list<const at::Tensor*> ins) {
  if (!g_enabled.load(std::memory_order_relaxed)) return {};
  const at::Tensor* ref = nullptr;
  int64_t nd = 0;
  for (const at::Tensor* t : ins) {
    if (t->device().is_hpu()) {
      if (ref == nullptr) {
        ref = t;
      } else if (t->device() != ref->device() || t->scalar_type() != ref->scalar_type()) {
        return {};
      }
      if (!t->is_contiguous()) return {};
      nd = std::max<int64_t>(nd, t->dim());
    } else if (!(t->is_cpu() && t->dim() == 0 && t->unsafeGetTensorImpl()->is_wrapped_number())) {
      return {};
    }
  }
  if (ref == nullptr || !fast_float(*ref) || nd > kMaxDim) return {};
  int64_t shape[kMaxDim];
  for (int64_t i = 0; i < nd; i++) shape[i] = 1;
  for (const at::Tensor* t : ins) {
    if (!t->device().is_hpu()) continue;
    for (int64_t j = 0, off = nd - t->dim(); j < t->dim(); j++) {
      const int64_t s = t->size(j);
      int64_t& b = shape[off + j];
      if (s == b || s == 1) continue;
      if (b != 1) return {};  // torch raises its error on the generic path
      b = s;
    }
  }
  const at::IntArrayRef full(shape, nd);
  for (const at::Tensor* t : ins) {
    if (t->device().is_hpu() && t->sizes() == full) return at::empty(full, ref->options());
  }
  return {};
}

#define HPUSIM_BINARY_ALPHA(name, which)                                                                  \
  at::Tensor name##_tensor(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {     \
    at::Tensor out = ew_result({&self, &other});                                                          \
    if (out.defined()) {                                                                                  \
      if (auto a = param(alpha, out.scalar_type()); a && run_ew(which, out, {&self, &other}, false,         \
                                                                {which == kSub ? -*a : *a})) {            \
        return out;                                                                                       \
      }                                                                                                   \
    }                                                                                                     \
    return at::_ops::name##_Tensor::redispatch(kPython, self, other, alpha);                              \
  }                                                                                                       \
  at::Tensor& name##__tensor(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {        \
    if (auto a = param(alpha, self.scalar_type()); a && run_ew(which, self, {&self, &other}, false,        \
                                                               {which == kSub ? -*a : *a})) {             \
      return self;                                                                                        \
    }                                                                                                     \
    return at::_ops::name##__Tensor::redispatch(kPython, self, other, alpha);                             \
  }
HPUSIM_BINARY_ALPHA(add, kAdd)
HPUSIM_BINARY_ALPHA(sub, kSub)
#undef HPUSIM_BINARY_ALPHA

#define HPUSIM_BINARY(name, which)                                                                        \
  at::Tensor name##_tensor(const at::Tensor& self, const at::Tensor& other) {                             \
    at::Tensor out = ew_result({&self, &other});                                                          \
    if (out.defined() && run_ew(which, out, {&self, &other}, true)) return out;                           \
    return at::_ops::name##_Tensor::redispatch(kPython, self, other);                                     \
  }                                                                                                       \
  at::Tensor& name##__tensor(at::Tensor& self, const at::Tensor& other) {                                 \
    if (run_ew(which, self, {&self, &other}, true)) return self;                                          \
    return at::_ops::name##__Tensor::redispatch(kPython, self, other);                                    \
  }
HPUSIM_BINARY(mul, kMul)
HPUSIM_BINARY(div, kDiv)
#undef HPUSIM_BINARY

at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  at::Tensor out = weight.isComplex() ? at::Tensor() : ew_result({&self, &end});
  if (out.defined() && run_ew(kLerp, out, {&self, &end}, true, {}, weight.toDouble())) return out;
  return at::_ops::lerp_Scalar::redispatch(kPython, self, end, weight);
}

at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  if (!weight.isComplex() && run_ew(kLerp, self, {&self, &end}, true, {}, weight.toDouble())) return self;
  return at::_ops::lerp__Scalar::redispatch(kPython, self, end, weight);
}

#define HPUSIM_TERNARY(name, which)                                                                       \
  at::Tensor name(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value) { \
    at::Tensor out = value.isComplex() ? at::Tensor() : ew_result({&self, &t1, &t2});                     \
    if (out.defined() && run_ew(which, out, {&self, &t1, &t2}, false, {value.toDouble()})) return out;    \
    return at::_ops::name::redispatch(kPython, self, t1, t2, value);                                      \
  }                                                                                                       \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value) { \
    if (!value.isComplex() && run_ew(which, self, {&self, &t1, &t2}, false, {value.toDouble()})) return self; \
    return at::_ops::name##_::redispatch(kPython, self, t1, t2, value);                                   \
  }
HPUSIM_TERNARY(addcmul, kAddcmul)
HPUSIM_TERNARY(addcdiv, kAddcdiv)
#undef HPUSIM_TERNARY

template <Op which, class AtenOp>
at::Tensor unary(const at::Tensor& self) {
  at::Tensor out = ew_result({&self});
  if (out.defined() && run_ew(which, out, {&self}, false)) return out;
  return AtenOp::redispatch(kPython, self);
}

template <Op which, class AtenOp>
at::Tensor& unary_(at::Tensor& self) {
  if (run_ew(which, self, {&self}, false)) return self;
  return AtenOp::redispatch(kPython, self);
}

at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold) {
  at::Tensor out = threshold.isComplex() ? at::Tensor() : ew_result({&grad_output, &self});
  if (out.defined() && run_ew(kThresholdBackward, out, {&grad_output, &self}, false, {threshold.toDouble()})) {
    return out;
  }
  return at::_ops::threshold_backward::redispatch(kPython, grad_output, self, threshold);
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  auto a = gelu_param(approximate);
  at::Tensor out = a ? ew_result({&self}) : at::Tensor();
  if (out.defined() && run_ew(kGelu, out, {&self}, false, {*a})) return out;
  return at::_ops::gelu::redispatch(kPython, self, approximate);
}

at::Tensor gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  auto a = gelu_param(approximate);
  at::Tensor out = a ? ew_result({&grad_output, &self}) : at::Tensor();
  if (out.defined() && run_ew(kGeluBackward, out, {&grad_output, &self}, false, {*a})) return out;
  return at::_ops::gelu_backward::redispatch(kPython, grad_output, self, approximate);
}

// Matrix products: the structured kernels' result is a contiguous (M, N) / (B, M, N).
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (g_enabled.load(std::memory_order_relaxed) && self.dim() == 2 && mat2.dim() == 2 &&
      self.size(1) == mat2.size(0) && fast_float(self) && on(mat2, self.device(), self.scalar_type())) {
    at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options());
    return mm_out(self, mat2, out);
  }
  return at::_ops::mm::redispatch(kPython, self, mat2);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (g_enabled.load(std::memory_order_relaxed) && self.dim() == 3 && mat2.dim() == 3 &&
      self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1) && fast_float(self) &&
      on(mat2, self.device(), self.scalar_type())) {
    at::Tensor out = at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options());
    return bmm_out(self, mat2, out);
  }
  return at::_ops::bmm::redispatch(kPython, self, mat2);
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  if (g_enabled.load(std::memory_order_relaxed) && mat1.dim() == 2 && mat2.dim() == 2 &&
      mat1.size(1) == mat2.size(0) && self.dim() <= 2 && fast_float(mat1) &&
      on(mat2, mat1.device(), mat1.scalar_type()) && on(self, mat1.device(), mat1.scalar_type())) {
    bool bcast = true;  // self expands to the result (torch raises otherwise)
    for (int64_t j = self.dim() - 1, i = 1; j >= 0; j--, i--) {
      const int64_t want = i == 0 ? mat1.size(0) : mat2.size(1);
      bcast = bcast && (self.size(j) == want || self.size(j) == 1);
    }
    if (bcast) {
      at::Tensor out = at::empty({mat1.size(0), mat2.size(1)}, mat1.options());
      return addmm_out(self, mat1, mat2, beta, alpha, out);
    }
  }
  return at::_ops::addmm::redispatch(kPython, self, mat1, mat2, beta, alpha);
}

// sum over dims of a float32/bfloat16 tensor into its own dtype: the result sum_out serves.
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  const int64_t nd = self.dim();
  if (g_enabled.load(std::memory_order_relaxed) && fast_float(self) && (!dtype || *dtype == self.scalar_type()) &&
      nd >= 1 && nd <= kMaxDim && plain(self)) {
    bool red[kMaxDim] = {false};
    bool ok = true;
    if (!dim || dim->empty()) {
      for (int64_t d = 0; d < nd; d++) red[d] = true;
    } else {
      for (int64_t d : *dim) {
        if (d < -nd || d >= nd) { ok = false; break; }
        d = d < 0 ? d + nd : d;
        if (red[d]) { ok = false; break; }
        red[d] = true;
      }
    }
    if (ok) {
      std::vector<int64_t> shape;
      for (int64_t d = 0; d < nd; d++) {
        if (!red[d]) shape.push_back(self.size(d));
        else if (keepdim) shape.push_back(1);
      }
      at::Tensor out = at::empty(shape, self.options());
      return sum_out(self, dim, keepdim, dtype, out);
    }
  }
  return at::_ops::sum_dim_IntList::redispatch(kPython, self, dim, keepdim, dtype);
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (g_enabled.load(std::memory_order_relaxed) && !half_to_float && fast_float(self) && self.is_contiguous()) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    if (softmax_fast(kSoftmax, false, self, dim, false, out)) return out;
  }
  return at::_ops::_softmax::redispatch(kPython, self, dim, half_to_float);
}

at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (g_enabled.load(std::memory_order_relaxed) && !half_to_float && fast_float(self) && self.is_contiguous()) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    if (softmax_fast(kLogSoftmax, true, self, dim, false, out)) return out;
  }
  return at::_ops::_log_softmax::redispatch(kPython, self, dim, half_to_float);
}

at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  if (g_enabled.load(std::memory_order_relaxed) && fast_float(output) && output.is_contiguous()) {
    at::Tensor gi = at::empty(output.sizes(), output.options());
    if (softmax_bwd_fast(kSoftmaxBackward, false, grad_output, output, dim, input_dtype, gi)) return gi;
  }
  return at::_ops::_softmax_backward_data::redispatch(kPython, grad_output, output, dim, input_dtype);
}

at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype) {
  if (g_enabled.load(std::memory_order_relaxed) && fast_float(output) && output.is_contiguous()) {
    at::Tensor gi = at::empty(output.sizes(), output.options());
    if (softmax_bwd_fast(kLogSoftmaxBackward, true, grad_output, output, dim, input_dtype, gi)) return gi;
  }
  return at::_ops::_log_softmax_backward_data::redispatch(kPython, grad_output, output, dim, input_dtype);
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("lerp.Scalar_out", TORCH_FN(lerp_scalar_out));
  m.impl("addcmul.out", TORCH_FN(addcmul_out));
  m.impl("addcdiv.out", TORCH_FN(addcdiv_out));
  m.impl("exp.out", TORCH_FN((unary_out<kExp, at::_ops::exp_out>)));
  m.impl("log.out", TORCH_FN((unary_out<kLog, at::_ops::log_out>)));
  m.impl("log2.out", TORCH_FN((unary_out<kLog2, at::_ops::log2_out>)));
  m.impl("log1p.out", TORCH_FN((unary_out<kLog1p, at::_ops::log1p_out>)));
  m.impl("expm1.out", TORCH_FN((unary_out<kExpm1, at::_ops::expm1_out>)));
  m.impl("sqrt.out", TORCH_FN((unary_out<kSqrt, at::_ops::sqrt_out>)));
  m.impl("rsqrt.out", TORCH_FN((unary_out<kRsqrt, at::_ops::rsqrt_out>)));
  m.impl("sin.out", TORCH_FN((unary_out<kSin, at::_ops::sin_out>)));
  m.impl("cos.out", TORCH_FN((unary_out<kCos, at::_ops::cos_out>)));
  m.impl("erf.out", TORCH_FN((unary_out<kErf, at::_ops::erf_out>)));
  m.impl("reciprocal.out", TORCH_FN((unary_out<kReciprocal, at::_ops::reciprocal_out>)));
  m.impl("sigmoid.out", TORCH_FN((unary_out<kSigmoid, at::_ops::sigmoid_out>)));
  m.impl("tanh.out", TORCH_FN((unary_out<kTanh, at::_ops::tanh_out>)));
  m.impl("neg.out", TORCH_FN((unary_out<kNeg, at::_ops::neg_out>)));
  m.impl("abs.out", TORCH_FN((unary_out<kAbs, at::_ops::abs_out>)));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.impl("threshold_backward.grad_input", TORCH_FN(threshold_backward_out));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar_));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_backward_out));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_backward_out));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward.grad_input", TORCH_FN(gelu_backward_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar_));
  m.impl("masked_fill.Scalar", TORCH_FN(masked_fill_scalar));
  // functional and in-place forms (skip torch's generic structured wrappers)
  m.impl("add.Tensor", TORCH_FN(add_tensor));
  m.impl("add_.Tensor", TORCH_FN(add__tensor));
  m.impl("sub.Tensor", TORCH_FN(sub_tensor));
  m.impl("sub_.Tensor", TORCH_FN(sub__tensor));
  m.impl("mul.Tensor", TORCH_FN(mul_tensor));
  m.impl("mul_.Tensor", TORCH_FN(mul__tensor));
  m.impl("div.Tensor", TORCH_FN(div_tensor));
  m.impl("div_.Tensor", TORCH_FN(div__tensor));
  m.impl("lerp.Scalar", TORCH_FN(lerp_scalar));
  m.impl("lerp_.Scalar", TORCH_FN(lerp_scalar_));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("exp", TORCH_FN((unary<kExp, at::_ops::exp>)));
  m.impl("exp_", TORCH_FN((unary_<kExp, at::_ops::exp_>)));
  m.impl("log", TORCH_FN((unary<kLog, at::_ops::log>)));
  m.impl("log_", TORCH_FN((unary_<kLog, at::_ops::log_>)));
  m.impl("log2", TORCH_FN((unary<kLog2, at::_ops::log2>)));
  m.impl("log2_", TORCH_FN((unary_<kLog2, at::_ops::log2_>)));
  m.impl("log1p", TORCH_FN((unary<kLog1p, at::_ops::log1p>)));
  m.impl("log1p_", TORCH_FN((unary_<kLog1p, at::_ops::log1p_>)));
  m.impl("expm1", TORCH_FN((unary<kExpm1, at::_ops::expm1>)));
  m.impl("expm1_", TORCH_FN((unary_<kExpm1, at::_ops::expm1_>)));
  m.impl("sqrt", TORCH_FN((unary<kSqrt, at::_ops::sqrt>)));
  m.impl("sqrt_", TORCH_FN((unary_<kSqrt, at::_ops::sqrt_>)));
  m.impl("rsqrt", TORCH_FN((unary<kRsqrt, at::_ops::rsqrt>)));
  m.impl("rsqrt_", TORCH_FN((unary_<kRsqrt, at::_ops::rsqrt_>)));
  m.impl("sin", TORCH_FN((unary<kSin, at::_ops::sin>)));
  m.impl("sin_", TORCH_FN((unary_<kSin, at::_ops::sin_>)));
  m.impl("cos", TORCH_FN((unary<kCos, at::_ops::cos>)));
  m.impl("cos_", TORCH_FN((unary_<kCos, at::_ops::cos_>)));
  m.impl("erf", TORCH_FN((unary<kErf, at::_ops::erf>)));
  m.impl("erf_", TORCH_FN((unary_<kErf, at::_ops::erf_>)));
  m.impl("reciprocal", TORCH_FN((unary<kReciprocal, at::_ops::reciprocal>)));
  m.impl("reciprocal_", TORCH_FN((unary_<kReciprocal, at::_ops::reciprocal_>)));
  m.impl("sigmoid", TORCH_FN((unary<kSigmoid, at::_ops::sigmoid>)));
  m.impl("sigmoid_", TORCH_FN((unary_<kSigmoid, at::_ops::sigmoid_>)));
  m.impl("tanh", TORCH_FN((unary<kTanh, at::_ops::tanh>)));
  m.impl("tanh_", TORCH_FN((unary_<kTanh, at::_ops::tanh_>)));
  m.impl("neg", TORCH_FN((unary<kNeg, at::_ops::neg>)));
  m.impl("neg_", TORCH_FN((unary_<kNeg, at::_ops::neg_>)));
  m.impl("abs", TORCH_FN((unary<kAbs, at::_ops::abs>)));
  m.impl("abs_", TORCH_FN((unary_<kAbs, at::_ops::abs_>)));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("mm", TORCH_FN(mm));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_log_softmax", TORCH_FN(log_softmax));
  m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
  m.impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward));
}

}  // namespace hpusim_fast

extern "C" {
// Turns the fast kernels on or off (HPUSIM_FAST_OPS); returns the previous setting.
int hpusim_glue_fast_ops(int on) {
  return hpusim_fast::g_enabled.exchange(on != 0) ? 1 : 0;
}
// Calls served by the fast kernels: the name of op i ("aten::mul"), or NULL past the end.
const char* hpusim_glue_fast_op_name(int i) {
  return i >= 0 && i < hpusim_fast::kNumOps ? hpusim_fast::g_ops[i].aten : nullptr;
}
int64_t hpusim_glue_fast_op_calls(int i) {
  return i >= 0 && i < hpusim_fast::kNumOps ? hpusim_fast::g_ops[i].calls.load() : 0;
}
}
