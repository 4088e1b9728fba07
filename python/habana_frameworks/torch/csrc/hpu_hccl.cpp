// The `hccl` process-group backend: c10d collectives on hpu tensors, carried over torch's
// own Gloo backend. hpu storage is host memory, so Gloo works on CPU aliases of the very
// same bytes; a dense copy is made only where Gloo needs contiguous data. What Gloo lacks
// (ReduceOp.AVG, list all_to_all, coalescing) is built here on top of it.
//
// Also here: the c10d dispatcher ops at the HPU key (torch 2.7 routes ProcessGroup calls
// through them and ships kernels only for CPU, CUDA and PrivateUse1), and the DDP timer
// for hpu. Python reaches the backend class as habana_frameworks.torch.distributed._hccl_C,
// a module whose init function lives in this (ctypes-loaded) glue library.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Registry.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
int hpusim_synchronize(int dev);
int hpusim_last_error(char* buf, int n);
int hpusim_capture_active();
int hpusim_capture_poison(char* reason);
}

namespace hpusim_hccl {

using c10d::Backend;
using c10d::OpType;
using c10d::ReduceOp;
using c10d::Work;
using TensorLists = std::vector<std::vector<at::Tensor>>;
using WorkPtr = c10::intrusive_ptr<Work>;

static std::string last_error() {
  char buf[1024];
  buf[0] = 0;
  hpusim_last_error(buf, sizeof(buf));
  return std::string(buf);
}

// Lazy mode: pending graphs must have produced the bytes Gloo reads, and must not write the
// bytes Gloo fills later. In eager mode this returns at once.
// Every collective starts here. None can be part of a captured graph (they run over Gloo
// on the host): during an HPU-graph capture this is the bridge's error (it records them
// only with lazy collectives, which hpusim cannot); a torch.compile capture is marked
// unusable and runs on.
static void flush_device() {
  if (int kind = hpusim_capture_active()) {
    if (kind == 2) {
      hpusim_capture_poison(const_cast<char*>("hccl collective during capture"));
    } else {
      const char* lazy = std::getenv("PT_HPU_ENABLE_LAZY_COLLECTIVES");
      TORCH_CHECK(lazy != nullptr && (std::strcmp(lazy, "1") == 0 || strcasecmp(lazy, "true") == 0),
                  "collective nonSFG is not supported during hpu graph capturing");
      TORCH_CHECK(false, "hccl: hpusim cannot record collectives into an HPU graph (they run over Gloo on the "
                         "host), lazy collectives or not; issue them outside the capture");
    }
  }
  TORCH_CHECK(hpusim_synchronize(0) == 0, last_error());
}

static bool is_fp8(at::ScalarType st) { return st == at::kFloat8_e5m2 || st == at::kFloat8_e4m3fn; }

// The dtypes the bridge's HCCL accepts.
static void check_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat8_e5m2:
    case at::kFloat8_e4m3fn:
    case at::kByte:
    case at::kChar:
    case at::kDouble:
    case at::kFloat:
    case at::kHalf:
    case at::kInt:
    case at::kLong:
    case at::kBFloat16:
    case at::kBool:
      return;
    default:
      TORCH_CHECK(false, "Input tensor data type is not supported for HCCL process group: ",
                  t.scalar_type());
  }
}

static void check_hpu(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "hccl: undefined tensor given to a collective");
  TORCH_CHECK(t.device().is_hpu(), "hccl: collectives on this process group need hpu tensors, got a tensor on ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "hccl: only dense (strided) hpu tensors are supported");
  check_dtype(t);
}

// A CPU tensor over the same bytes as an hpu tensor; it keeps the hpu storage alive for as
// long as Gloo may touch it.
static at::Tensor cpu_alias(const at::Tensor& t) {
  if (t.numel() == 0) {
    return at::empty(t.sizes(), t.options().device(at::kCPU));
  }
  c10::Storage keep = t.storage();
  return at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [keep](void*) {}, t.options().device(at::kCPU));
}

enum Access { kRead = 1, kWrite = 2, kReadWrite = 3 };

// What Gloo sees for one hpu tensor: the alias itself when it is contiguous, else a dense
// copy that is written back (into `target`) once the collective is done. Gloo has no fp8:
// as on Gaudi, fp8 bytes travel as uint8, and reductions run on a float32 copy.
struct Staged {
  at::Tensor alias;   // the hpu tensor's bytes, as a CPU tensor
  at::Tensor target;  // what results are written back into (alias, or its uint8 view)
  at::Tensor buf;     // what Gloo reads and writes
  bool write_back = false;
};

static Staged stage(const at::Tensor& t, Access access, bool reduce = false) {
  check_hpu(t);
  Staged s;
  s.alias = cpu_alias(t);
  s.target = s.alias;
  if (is_fp8(t.scalar_type())) {
    if (reduce) {
      s.buf = (access & kRead) ? s.alias.to(at::kFloat) : at::empty(s.alias.sizes(), s.alias.options().dtype(at::kFloat));
      s.write_back = (access & kWrite) != 0;
      return s;
    }
    s.target = s.alias.view(at::kByte);
  }
  if (s.target.is_contiguous()) {
    s.buf = s.target;
  } else {
    s.buf = (access & kRead) ? s.target.contiguous() : at::empty(s.target.sizes(), s.target.options());
    s.write_back = (access & kWrite) != 0;
  }
  return s;
}

using StagedList = std::shared_ptr<std::vector<Staged>>;

static StagedList stage_all(const std::vector<at::Tensor>& ts, Access access, bool reduce = false) {
  auto out = std::make_shared<std::vector<Staged>>();
  out->reserve(ts.size());
  for (const auto& t : ts) out->push_back(stage(t, access, reduce));
  return out;
}

static std::vector<at::Tensor> bufs(const StagedList& s) {
  std::vector<at::Tensor> out;
  out.reserve(s->size());
  for (const auto& x : *s) out.push_back(x.buf);
  return out;
}

static void write_back(const StagedList& s) {
  for (auto& x : *s) {
    if (x.write_back) x.target.copy_(x.buf);
  }
}

// The reduce op Gloo runs for a requested one. HCCL supports SUM, AVG, MIN, MAX and PRODUCT;
// AVG is a SUM divided afterwards (Gloo has no AVG); on bool, SUM is a logical or (MAX) and
// PRODUCT a logical and (MIN), as on Gaudi.
struct Reduction {
  ReduceOp gloo_op;
  bool average = false;
};

static Reduction reduction(const ReduceOp& op, at::ScalarType dtype) {
  ReduceOp::RedOpType kind = op.op_;
  switch (kind) {
    case ReduceOp::SUM:
    case ReduceOp::MIN:
    case ReduceOp::MAX:
    case ReduceOp::PRODUCT:
      break;
    case ReduceOp::AVG:
      TORCH_CHECK(dtype != at::kBool, "Cannot use ReduceOp.AVG with boolean inputs");
      kind = ReduceOp::SUM;
      break;
    default:  // PREMUL_SUM and the bitwise ops, as on Gaudi
      TORCH_CHECK(false, "Unsupported ReduceOp for HCCL process group");
  }
  if (dtype == at::kBool) {
    if (kind == ReduceOp::SUM) kind = ReduceOp::MAX;
    if (kind == ReduceOp::PRODUCT) kind = ReduceOp::MIN;
  }
  return Reduction{ReduceOp(kind), op.op_ == ReduceOp::AVG};
}

static void divide(const at::Tensor& t, int64_t n) {
  if (at::isFloatingType(t.scalar_type())) {
    t.div_(n);
  } else {
    t.div_(n, "trunc");  // integer mean, truncated as an integer division
  }
}

// A Work whose state is its future: the result and error views c10d asks for all read it.
class FutureWork : public Work {
 public:
  FutureWork(OpType type, std::vector<at::Tensor> outputs)
      : Work(-1, type),
        outputs_(std::move(outputs)),
        fut_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

  bool isSuccess() const override { return fut_->completed() && !fut_->hasError(); }
  std::exception_ptr exception() const override {
    return fut_->completed() ? fut_->exception_ptr() : nullptr;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_; }

 protected:
  void wait_future() {
    fut_->wait();
    if (fut_->hasError()) std::rethrow_exception(fut_->exception_ptr());
  }

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
};

// A collective in flight. Its future completes with the caller's hpu tensors once Gloo is
// done and the post-processing (AVG division, write-back of dense copies) has run, so DDP's
// comm hooks and `wait()` both see finished results. Gloo's send/recv work has no future: then
// the work completes in wait().
class HcclWork : public FutureWork {
 public:
  HcclWork(OpType type, WorkPtr inner, std::function<void()> post, std::vector<at::Tensor> outputs)
      : FutureWork(type, std::move(outputs)), inner_(std::move(inner)), post_(std::move(post)) {
    c10::intrusive_ptr<c10::ivalue::Future> inner_fut;
    if (inner_) {
      try {
        inner_fut = inner_->getFuture();
      } catch (const std::exception&) {
        inner_fut.reset();
      }
    }
    if (inner_fut) {
      chained_ = true;
      auto fut = fut_;
      auto post_fn = post_;
      auto outs = outputs_;
      inner_fut->addCallback([fut, post_fn, outs](c10::ivalue::Future& done) {
        if (done.hasError()) {
          fut->setError(done.exception_ptr());
          return;
        }
        try {
          if (post_fn) post_fn();
          fut->markCompleted(c10::IValue(outs));
        } catch (...) {
          fut->setError(std::current_exception());
        }
      });
    } else if (!inner_) {
      complete();
    }
  }

  bool isCompleted() override {
    if (!chained_ && inner_ && inner_->isCompleted()) {
      std::exception_ptr err = inner_->exception();
      if (err) {
        fail(err);
      } else {
        complete();
      }
    }
    return fut_->completed();
  }

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    if (inner_) {
      try {
        inner_->wait(timeout);
      } catch (...) {
        fail(std::current_exception());
        throw;
      }
    }
    if (!chained_) complete();
    wait_future();
    return true;
  }

 private:
  void complete() {
    std::call_once(done_, [this] {
      try {
        if (post_) post_();
        fut_->markCompleted(c10::IValue(outputs_));
      } catch (...) {
        fut_->setError(std::current_exception());
      }
    });
  }

  void fail(std::exception_ptr err) {
    std::call_once(done_, [this, err] {
      if (!fut_->completed()) fut_->setError(err);
    });
  }

  WorkPtr inner_;
  std::function<void()> post_;
  bool chained_ = false;
  std::once_flag done_;
};

// The ops issued between startCoalescing and endCoalescing, waited for as one.
class CoalescedWork : public FutureWork {
 public:
  explicit CoalescedWork(std::vector<WorkPtr> works)
      : FutureWork(OpType::COALESCED, {}), works_(std::move(works)) {
    std::vector<at::Tensor> outs;
    for (auto& w : works_) {
      auto r = w->result();
      outs.insert(outs.end(), r.begin(), r.end());
    }
    outputs_ = outs;
    if (works_.empty()) {
      fut_->markCompleted(c10::IValue(outputs_));
      return;
    }
    auto remaining = std::make_shared<std::atomic<size_t>>(works_.size());
    auto failed = std::make_shared<std::atomic<bool>>(false);
    auto fut = fut_;
    for (auto& w : works_) {
      w->getFuture()->addCallback([fut, remaining, failed, outs](c10::ivalue::Future& done) {
        if (done.hasError()) {
          if (!failed->exchange(true)) fut->setError(done.exception_ptr());
        } else if (remaining->fetch_sub(1) == 1 && !failed->load()) {
          fut->markCompleted(c10::IValue(outs));
        }
      });
    }
  }

  bool isCompleted() override {
    for (auto& w : works_) w->isCompleted();
    return fut_->completed();
  }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    for (auto& w : works_) w->wait(timeout);
    wait_future();
    return true;
  }

 private:
  std::vector<WorkPtr> works_;
};

class ProcessGroupHCCL : public Backend {
 public:
  ProcessGroupHCCL(c10::intrusive_ptr<Backend> gloo, int rank, int size, std::string group_name)
      : Backend(rank, size), gloo_(std::move(gloo)) {
    TORCH_CHECK(gloo_, "hccl: a Gloo backend is required");
    if (!group_name.empty()) setGroupUid(group_name);
  }

  const std::string getBackendName() const override { return "hccl"; }

  c10::intrusive_ptr<Backend> gloo() const { return gloo_; }

  bool supportsCoalescing() const override { return true; }

  void startCoalescing() override {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!coalescing_,
                "Coalescing is already in progress. Have you invoked startCoalescing again without "
                "endCoalescing. BTW nested coalesing is not supported.");
    coalescing_ = true;
    coalesced_.clear();
  }

  WorkPtr endCoalescing() override {
    std::vector<WorkPtr> works;
    {
      std::lock_guard<std::mutex> lock(mu_);
      TORCH_CHECK(coalescing_, "endCoalescing invoked without startCoalescing");
      coalescing_ = false;
      works.swap(coalesced_);
    }
    return c10::make_intrusive<CoalescedWork>(std::move(works));
  }

  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    return in_place(OpType::BROADCAST, tensors, kReadWrite, [&](std::vector<at::Tensor>& b) {
      return gloo_->broadcast(b, opts);
    });
  }

  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    TORCH_CHECK(!opts.sparseIndices.has_value(), "hccl: sparse all_reduce is not supported");
    return reducing(OpType::ALLREDUCE, "all_reduce", tensors, opts, true,
                    [&](std::vector<at::Tensor>& b, c10d::AllreduceOptions& o) { return gloo_->allreduce(b, o); });
  }

  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override {
    return reducing(OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors, opts, true,
                    [&](std::vector<at::Tensor>& b, c10d::AllreduceCoalescedOptions& o) {
                      return gloo_->allreduce_coalesced(b, o);
                    });
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return reducing(OpType::REDUCE, "reduce", tensors, opts, getRank() == opts.rootRank,
                    [&](std::vector<at::Tensor>& b, c10d::ReduceOptions& o) { return gloo_->reduce(b, o); });
  }

  WorkPtr allgather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override {
    return into_lists(OpType::ALLGATHER, outputs, inputs, [&](TensorLists& o, std::vector<at::Tensor>& i) {
      return gloo_->allgather(o, i, opts);
    });
  }

  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    return one_to_one(OpType::_ALLGATHER_BASE, output, input, [&](at::Tensor& o, at::Tensor& i) {
      return gloo_->_allgather_base(o, i, opts);
    });
  }

  WorkPtr allgather_coalesced(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override {
    return into_lists(OpType::ALLGATHER_COALESCED, outputs, inputs, [&](TensorLists& o, std::vector<at::Tensor>& i) {
      return gloo_->allgather_coalesced(o, i, opts);
    });
  }

  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) override {
    flush_device();
    auto in = stage_all(inputs, kRead);
    auto b_in = bufs(in);
    auto out = stage_all(outputs, kWrite);
    auto b_out = bufs(out);
    auto inner = gloo_->allgather_into_tensor_coalesced(b_out, b_in, opts);
    return track(OpType::COALESCED, inner, [in, out] { write_back(out); }, outputs);
  }

  WorkPtr gather(TensorLists& outputs, std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override {
    return into_lists(OpType::GATHER, outputs, inputs, [&](TensorLists& o, std::vector<at::Tensor>& i) {
      return gloo_->gather(o, i, opts);
    });
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs, const c10d::ScatterOptions& opts) override {
    flush_device();
    auto ins = stage_lists(inputs, kRead);
    auto b_in = bufs_lists(ins);
    auto out = stage_all(outputs, kWrite);
    auto b_out = bufs(out);
    auto inner = gloo_->scatter(b_out, *b_in, opts);
    return track(OpType::SCATTER, inner, [ins, b_in, out] { write_back(out); }, outputs);
  }

  // Gloo has only the flat form: the input list travels as one buffer.
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "hccl: reduce_scatter takes one output tensor and one input list");
    TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "hccl: reduce_scatter needs one input per rank (",
                getSize(), "), got ", inputs[0].size());
    flush_device();
    Reduction r = reduction(opts.reduceOp, outputs[0].scalar_type());
    auto out = stage_all(outputs, kWrite, true);
    auto in = stage_all(inputs[0], kRead, true);
    std::vector<at::Tensor> flat_in;
    for (auto& s : *in) {
      TORCH_CHECK(s.buf.scalar_type() == (*out)[0].buf.scalar_type() && s.buf.numel() == outputs[0].numel(),
                  "hccl: reduce_scatter inputs must match the output's dtype and size");
      flat_in.push_back(s.buf.reshape({-1}));
    }
    at::Tensor send = at::cat(flat_in);
    at::Tensor recv = (*out)[0].buf.view({-1});
    std::function<void()> take;
    auto inner = reduce_scatter_flat({recv}, {send}, r, opts, &take);
    auto post = post_reduce(out, r.average, true);
    return track(OpType::REDUCE_SCATTER, inner, [in, send, take, post] { take(); post(); }, outputs);
  }

  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outputs{output}, inputs{input};
    return reduce_scatter_tensors(OpType::_REDUCE_SCATTER_BASE, outputs, inputs, opts);
  }

  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(!outputs.empty(), "hccl: reduce_scatter_tensor_coalesced needs output tensors");
    return reduce_scatter_tensors(OpType::COALESCED, outputs, inputs, opts);
  }


  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                        std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) override {
    return one_to_one(OpType::ALLTOALL_BASE, output, input, [&](at::Tensor& o, at::Tensor& i) {
      return gloo_->alltoall_base(o, i, output_split_sizes, input_split_sizes, opts);
    });
  }

  // Gloo has only the single-tensor form: the lists travel as one flat buffer each, split by
  // the tensors' element counts.
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
                "hccl: all_to_all needs one input and one output tensor per rank (", getSize(), "), got ",
                inputs.size(), " inputs and ", outputs.size(), " outputs");
    flush_device();
    auto in = stage_all(inputs, kRead);
    auto out = stage_all(outputs, kWrite);
    auto dtype = (*in)[0].buf.scalar_type();
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> flat_in;
    for (auto& s : *in) {
      TORCH_CHECK(s.buf.scalar_type() == dtype, "hccl: all_to_all tensors must share one dtype");
      flat_in.push_back(s.buf.reshape({-1}));
      in_splits.push_back(s.buf.numel());
    }
    for (auto& s : *out) {
      TORCH_CHECK(s.buf.scalar_type() == dtype, "hccl: all_to_all tensors must share one dtype");
      out_splits.push_back(s.buf.numel());
    }
    int64_t total_out = 0;
    for (auto n : out_splits) total_out += n;
    at::Tensor send = at::cat(flat_in);
    at::Tensor recv = at::empty({total_out}, send.options());
    // Gloo may move the split vectors away: it gets copies, the write-back keeps the originals.
    std::vector<int64_t> gloo_out_splits = out_splits, gloo_in_splits = in_splits;
    auto inner = gloo_->alltoall_base(recv, send, gloo_out_splits, gloo_in_splits, opts);
    auto post = [out, recv, send, out_splits] {
      int64_t off = 0;
      for (size_t i = 0; i < out->size(); ++i) {
        auto& s = (*out)[i];
        s.target.copy_(recv.narrow(0, off, out_splits[i]).view(s.target.sizes()));
        off += out_splits[i];
      }
    };
    return track(OpType::ALLTOALL, inner, post, outputs);
  }

  WorkPtr send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override {
    return in_place(OpType::SEND, tensors, kRead, [&](std::vector<at::Tensor>& b) {
      return gloo_->send(b, dst_rank, tag);
    });
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override {
    return in_place(OpType::RECV, tensors, kWrite, [&](std::vector<at::Tensor>& b) {
      return gloo_->recv(b, src_rank, tag);
    });
  }

  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return in_place(OpType::RECVANYSOURCE, tensors, kWrite, [&](std::vector<at::Tensor>& b) {
      return gloo_->recvAnysource(b, tag);
    });
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts) override {
    flush_device();
    c10d::BarrierOptions o;
    o.timeout = opts.timeout;  // Gloo's barrier is a host barrier; the hpu device id is not its business
    return track(OpType::BARRIER, gloo_->barrier(o), nullptr, {});
  }

 private:
  // The shapes of call the collectives share: each stages the hpu tensors as Gloo buffers,
  // issues the Gloo call and tracks a Work whose completion writes the results back.

  // Tensors Gloo reads and/or overwrites in place (broadcast, send, recv).
  template <class Call>
  WorkPtr in_place(OpType type, std::vector<at::Tensor>& tensors, Access access, Call call) {
    flush_device();
    auto st = stage_all(tensors, access);
    auto b = bufs(st);
    auto inner = call(b);
    return track(type, inner, [st] { write_back(st); }, tensors);
  }

  // Reductions into the tensors themselves; `holds_result`: this rank receives the result.
  template <class Opts, class Call>
  WorkPtr reducing(OpType type, const char* name, std::vector<at::Tensor>& tensors, const Opts& opts,
                   bool holds_result, Call call) {
    TORCH_CHECK(!tensors.empty(), "hccl: ", name, " needs a tensor");
    flush_device();
    Reduction r = reduction(opts.reduceOp, tensors[0].scalar_type());
    auto st = stage_all(tensors, kReadWrite, true);
    auto b = bufs(st);
    Opts o = opts;
    o.reduceOp = r.gloo_op;
    auto inner = call(b, o);
    return track(type, inner, post_reduce(st, r.average, holds_result), tensors);
  }

  // One input list into lists of outputs (allgather, gather).
  template <class Call>
  WorkPtr into_lists(OpType type, TensorLists& outputs, std::vector<at::Tensor>& inputs, Call call) {
    flush_device();
    auto in = stage_all(inputs, kRead);
    auto b_in = bufs(in);
    auto outs = stage_lists(outputs, kWrite);
    auto b_out = bufs_lists(outs);
    auto inner = call(*b_out, b_in);
    return track(type, inner, [in, outs, b_out] { write_back_lists(outs); }, flat(outputs));
  }

  // One input tensor into one output tensor.
  template <class Call>
  WorkPtr one_to_one(OpType type, at::Tensor& output, at::Tensor& input, Call call) {
    flush_device();
    auto in = stage_all({input}, kRead);
    auto out = stage_all({output}, kWrite);
    auto inner = call((*out)[0].buf, (*in)[0].buf);
    return track(type, inner, [in, out] { write_back(out); }, {output});
  }

  // Reduce-scatter of whole tensors: input i is world_size times output i.
  WorkPtr reduce_scatter_tensors(OpType type, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::ReduceScatterOptions& opts) {
    TORCH_CHECK(inputs.size() == outputs.size(), "hccl: reduce_scatter_tensor_coalesced needs as many inputs as outputs");
    flush_device();
    Reduction r = reduction(opts.reduceOp, outputs[0].scalar_type());
    auto in = stage_all(inputs, kRead, true);
    auto b_in = bufs(in);
    auto out = stage_all(outputs, kWrite, true);
    auto b_out = bufs(out);
    std::vector<at::Tensor> flat_out, flat_in;
    for (size_t i = 0; i < b_out.size(); ++i) {
      TORCH_CHECK(b_in[i].numel() == b_out[i].numel() * getSize(),
                  "hccl: reduce_scatter_tensor input must be world_size times the output's size");
      flat_out.push_back(b_out[i].view({-1}));
      flat_in.push_back(b_in[i].view({-1}));
    }
    std::function<void()> take;
    auto inner = reduce_scatter_flat(flat_out, flat_in, r, opts, &take);
    auto post = post_reduce(out, r.average, true);
    return track(type, inner, [in, take, post] { take(); post(); }, outputs);
  }

  // Gloo's reduce-scatter only sums. Other ops reduce a scratch copy of the whole input with
  // all_reduce and keep this rank's chunk (*take copies it into the output once done).
  WorkPtr reduce_scatter_flat(std::vector<at::Tensor> outs, std::vector<at::Tensor> ins, const Reduction& r,
                              const c10d::ReduceScatterOptions& opts, std::function<void()>* take) {
    if (r.gloo_op.op_ == ReduceOp::SUM) {
      *take = [] {};
      c10d::ReduceScatterOptions o = opts;
      o.reduceOp = r.gloo_op;
      if (outs.size() == 1) return gloo_->_reduce_scatter_base(outs[0], ins[0], o);
      return gloo_->reduce_scatter_tensor_coalesced(outs, ins, o);
    }
    std::vector<at::Tensor> scratch;
    for (auto& t : ins) scratch.push_back(t.clone());
    int64_t rank = getRank();
    *take = [outs, scratch, rank] {
      for (size_t i = 0; i < outs.size(); ++i) {
        int64_t n = outs[i].numel();
        outs[i].copy_(scratch[i].narrow(0, rank * n, n));
      }
    };
    c10d::AllreduceCoalescedOptions o;
    o.reduceOp = r.gloo_op;
    o.timeout = opts.timeout;
    if (scratch.size() == 1) return gloo_->allreduce(scratch, o);
    return gloo_->allreduce_coalesced(scratch, o);
  }

  // Divide an AVG's sum by the group size where the result lands, then write dense copies back.
  std::function<void()> post_reduce(const StagedList& st, bool average, bool holds_result) const {
    int64_t n = getSize();
    return [st, average, holds_result, n] {
      if (average && holds_result) {
        for (auto& s : *st) divide(s.buf, n);
      }
      write_back(st);
    };
  }

  static std::shared_ptr<std::vector<StagedList>> stage_lists(TensorLists& lists, Access access) {
    auto out = std::make_shared<std::vector<StagedList>>();
    for (auto& l : lists) out->push_back(stage_all(l, access));
    return out;
  }

  static std::shared_ptr<TensorLists> bufs_lists(const std::shared_ptr<std::vector<StagedList>>& s) {
    auto out = std::make_shared<TensorLists>();
    for (auto& l : *s) out->push_back(bufs(l));
    return out;
  }

  static void write_back_lists(const std::shared_ptr<std::vector<StagedList>>& s) {
    for (auto& l : *s) write_back(l);
  }

  static std::vector<at::Tensor> flat(const TensorLists& lists) {
    std::vector<at::Tensor> out;
    for (auto& l : lists) out.insert(out.end(), l.begin(), l.end());
    return out;
  }

  WorkPtr track(OpType type, WorkPtr inner, std::function<void()> post, std::vector<at::Tensor> outputs) {
    WorkPtr w = c10::make_intrusive<HcclWork>(type, std::move(inner), std::move(post), std::move(outputs));
    std::lock_guard<std::mutex> lock(mu_);
    if (coalescing_) coalesced_.push_back(w);
    return w;
  }

  c10::intrusive_ptr<Backend> gloo_;
  std::mutex mu_;
  bool coalescing_ = false;
  std::vector<WorkPtr> coalesced_;
};

}  // namespace hpusim_hccl

// The c10d dispatcher ops at the HPU key, with torch 2.7.1's schemas: each hands its tensors
// to the process group's hpu backend (hccl), as torch's own kernels do for CPU and CUDA.
namespace hpusim_hccl_ops {

using c10d::ProcessGroup;
using c10d::ReduceOp;
using c10d::Work;
using hpusim_hccl::TensorLists;
using PG = c10::intrusive_ptr<ProcessGroup>;
using WorkPtr = c10::intrusive_ptr<Work>;
using std::chrono::milliseconds;

static c10::intrusive_ptr<c10d::Backend> hpu_backend(const PG& pg) {
  return pg->getBackend(c10::DeviceType::HPU);
}

WorkPtr send(at::TensorList tensors, const PG& pg, int64_t dst, int64_t tag) {
  auto v = tensors.vec();
  return hpu_backend(pg)->send(v, static_cast<int>(dst), static_cast<int>(tag));
}

WorkPtr recv_(at::TensorList tensors, const PG& pg, int64_t src, int64_t tag) {
  auto v = tensors.vec();
  return hpu_backend(pg)->recv(v, static_cast<int>(src), static_cast<int>(tag));
}

WorkPtr recv_any_source_(at::TensorList tensors, const PG& pg, int64_t tag) {
  auto v = tensors.vec();
  return hpu_backend(pg)->recvAnysource(v, static_cast<int>(tag));
}

WorkPtr reduce_(at::TensorList tensors, const PG& pg, const c10::intrusive_ptr<ReduceOp>& op, int64_t root_rank,
                int64_t root_tensor, int64_t timeout) {
  auto v = tensors.vec();
  c10d::ReduceOptions o;
  o.reduceOp = *op;
  o.rootRank = root_rank;
  o.rootTensor = root_tensor;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->reduce(v, o);
}

std::tuple<std::vector<at::Tensor>, WorkPtr> broadcast_(at::TensorList tensors, const PG& pg, int64_t root_rank,
                                                        int64_t root_tensor, bool async_op, int64_t timeout) {
  auto v = tensors.vec();
  c10d::BroadcastOptions o;
  o.rootRank = root_rank;
  o.rootTensor = root_tensor;
  o.timeout = milliseconds(timeout);
  o.asyncOp = async_op;
  auto work = hpu_backend(pg)->broadcast(v, o);
  return {std::move(v), work};
}

std::tuple<std::vector<at::Tensor>, WorkPtr> allreduce_(at::TensorList tensors, const PG& pg,
                                                        const c10::intrusive_ptr<ReduceOp>& op,
                                                        const std::optional<at::Tensor>& sparse_indices,
                                                        int64_t timeout) {
  auto v = tensors.vec();
  c10d::AllreduceOptions o;
  o.reduceOp = *op;
  o.timeout = milliseconds(timeout);
  o.sparseIndices = sparse_indices;
  auto work = hpu_backend(pg)->allreduce(v, o);
  return {std::move(v), work};
}

WorkPtr allreduce_coalesced_(at::TensorList tensors, const PG& pg, const c10::intrusive_ptr<ReduceOp>& op,
                             int64_t timeout) {
  auto v = tensors.vec();
  c10d::AllreduceCoalescedOptions o;
  o.reduceOp = *op;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->allreduce_coalesced(v, o);
}

std::tuple<TensorLists, WorkPtr> allgather_(const TensorLists& outputs, at::TensorList inputs, const PG& pg,
                                            int64_t timeout) {
  auto in = inputs.vec();
  auto out = outputs;  // the same tensors (not copies of data), so the caller sees the results
  c10d::AllgatherOptions o;
  o.timeout = milliseconds(timeout);
  auto work = hpu_backend(pg)->allgather(out, in, o);
  return {outputs, work};
}

std::tuple<at::Tensor, WorkPtr> _allgather_base_(at::Tensor& output, at::Tensor& input, const PG& pg, bool async_op,
                                                 int64_t timeout) {
  c10d::AllgatherOptions o;
  o.timeout = milliseconds(timeout);
  o.asyncOp = async_op;
  auto work = hpu_backend(pg)->_allgather_base(output, input, o);
  return {output, work};
}

WorkPtr allgather_coalesced_(const TensorLists& outputs, const at::TensorList& inputs, const PG& pg) {
  auto in = inputs.vec();
  auto out = outputs;
  return hpu_backend(pg)->allgather_coalesced(out, in);
}

WorkPtr allgather_into_tensor_coalesced_(at::TensorList outputs, at::TensorList inputs, const PG& pg) {
  auto in = inputs.vec();
  auto out = outputs.vec();
  return hpu_backend(pg)->allgather_into_tensor_coalesced(out, in);
}

std::tuple<std::vector<at::Tensor>, WorkPtr> reduce_scatter_(const at::TensorList& outputs,
                                                             const TensorLists& inputs, const PG& pg,
                                                             const c10::intrusive_ptr<ReduceOp>& op,
                                                             int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs;
  c10d::ReduceScatterOptions o;
  o.reduceOp = *op;
  o.timeout = milliseconds(timeout);
  auto work = hpu_backend(pg)->reduce_scatter(out, in, o);
  return {std::move(out), work};
}

std::tuple<at::Tensor, WorkPtr> _reduce_scatter_base_(at::Tensor& output, at::Tensor& input, const PG& pg,
                                                      const c10::intrusive_ptr<ReduceOp>& op, bool async_op,
                                                      int64_t timeout) {
  c10d::ReduceScatterOptions o;
  o.reduceOp = *op;
  o.timeout = milliseconds(timeout);
  o.asyncOp = async_op;
  auto work = hpu_backend(pg)->_reduce_scatter_base(output, input, o);
  return {output, work};
}

WorkPtr reduce_scatter_tensor_coalesced_(at::TensorList outputs, at::TensorList inputs, const PG& pg,
                                         const c10::intrusive_ptr<ReduceOp>& op, int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs.vec();
  c10d::ReduceScatterOptions o;
  o.reduceOp = *op;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->reduce_scatter_tensor_coalesced(out, in, o);
}

WorkPtr gather_(const TensorLists& outputs, const at::TensorList& inputs, const PG& pg, int64_t root_rank,
                int64_t timeout) {
  auto in = inputs.vec();
  auto out = outputs;
  c10d::GatherOptions o;
  o.rootRank = root_rank;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->gather(out, in, o);
}

std::tuple<std::vector<at::Tensor>, WorkPtr> scatter_(const at::TensorList& outputs, const TensorLists& inputs,
                                                      const PG& pg, int64_t root_rank, bool async_op,
                                                      int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs;
  c10d::ScatterOptions o;
  o.rootRank = root_rank;
  o.timeout = milliseconds(timeout);
  o.asyncOp = async_op;
  auto work = hpu_backend(pg)->scatter(out, in, o);
  return {std::move(out), work};
}

std::tuple<std::vector<at::Tensor>, WorkPtr> alltoall_(const at::TensorList& outputs, const at::TensorList& inputs,
                                                       const PG& pg, int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs.vec();
  c10d::AllToAllOptions o;
  o.timeout = milliseconds(timeout);
  auto work = hpu_backend(pg)->alltoall(out, in, o);
  return {std::move(out), work};
}

WorkPtr alltoall_base_(at::Tensor& output, at::Tensor& input, const PG& pg, std::vector<int64_t> output_split_sizes,
                       std::vector<int64_t> input_split_sizes, int64_t timeout) {
  c10d::AllToAllOptions o;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->alltoall_base(output, input, output_split_sizes, input_split_sizes, o);
}

WorkPtr barrier(at::Tensor /* tensor */, const PG& pg, const std::vector<int64_t>& device_ids, int64_t timeout) {
  c10d::BarrierOptions o;
  o.device_ids = device_ids;
  o.timeout = milliseconds(timeout);
  return hpu_backend(pg)->barrier(o);
}

TORCH_LIBRARY_IMPL(c10d, HPU, m) {
  m.impl("send", send);
  m.impl("recv_", recv_);
  m.impl("recv_any_source_", recv_any_source_);
  m.impl("reduce_", reduce_);
  m.impl("broadcast_", broadcast_);
  m.impl("allreduce_", allreduce_);
  m.impl("allreduce_coalesced_", allreduce_coalesced_);
  m.impl("allgather_", allgather_);
  m.impl("_allgather_base_", _allgather_base_);
  m.impl("allgather_coalesced_", allgather_coalesced_);
  m.impl("allgather_into_tensor_coalesced_", allgather_into_tensor_coalesced_);
  m.impl("reduce_scatter_", reduce_scatter_);
  m.impl("_reduce_scatter_base_", _reduce_scatter_base_);
  m.impl("reduce_scatter_tensor_coalesced_", reduce_scatter_tensor_coalesced_);
  m.impl("gather_", gather_);
  m.impl("scatter_", scatter_);
  m.impl("alltoall_", alltoall_);
  m.impl("alltoall_base_", alltoall_base_);
  m.impl("barrier", barrier);
}

}  // namespace hpusim_hccl_ops

// DDP's reducer times forward, backward and communication with a per-device-type timer; hpu
// work runs in host order, so host timestamps measure it (without one DDP warns once).
namespace c10d {
namespace {
class HpuTimer : public Timer {
 public:
  explicit HpuTimer(c10::Device /* device */) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    auto s = getTimestamp(start);
    auto e = getTimestamp(end);
    if (!s || !e || *e < *s) return std::nullopt;
    return *e - *s;
  }
};
}  // namespace
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kHPU, HpuTimer);
}  // namespace c10d

PYBIND11_MODULE(_hccl_C, m) {
  namespace py = pybind11;
  using hpusim_hccl::ProcessGroupHCCL;
  m.doc() = "hpusim's hccl process-group backend (collectives carried over Gloo)";
  py::class_<ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupHCCL>>(m, "ProcessGroupHCCL")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int, std::string>(), py::arg("gloo"), py::arg("rank"),
           py::arg("size"), py::arg("group_name") = "", py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("gloo", &ProcessGroupHCCL::gloo);
}
