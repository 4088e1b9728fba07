// Autograd device threads for hpu when hpusim is imported after a backward pass.
//
// torch's autograd engine sizes its per-device ready queues once, on the first backward in
// the process, from the device guards registered at that moment. If a CPU-only backward ran
// before `import habana_frameworks.torch` (notebooks, Lightning, TORCH_DEVICE_BACKEND_AUTOLOAD=0)
// the engine has no queue for hpu, and the first hpu backward on a thread with autograd
// multithreading on fails an internal assertion (`device_ready_queues_.size()`). The real
// bridge is loaded by torch's device-backend autoload before any user code runs, so it never
// meets this; hpusim, loadable late, adds the missing queues and threads exactly as the
// engine's own start-up would have (one queue and one detached `thread_init` worker per
// device index), so late and early imports behave the same.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pthread.h>
#include <torch/csrc/autograd/engine.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hpusim_glue {
namespace {

using torch::autograd::Engine;
using torch::autograd::ReadyQueue;

// The engine keeps its queues protected; a derived type may name the member, which gives a
// pointer-to-member usable on the engine instance itself.
struct EngineQueues : Engine {
  static std::vector<std::shared_ptr<ReadyQueue>>& of(Engine& engine) {
    return engine.*(&EngineQueues::device_ready_queues_);
  }
};

std::mutex g_grow_mutex;
// How many queues the engine had before hpusim added its own (restored in a forked child,
// whose copies of the added worker threads do not exist).
size_t g_engine_queues = 0;
bool g_added = false;

void forget_added_queues_in_child() {
  // A forked child has no autograd worker threads. torch's own start-up marks such a child
  // so its next multithreaded backward raises; for the queues added here, dropping them
  // gives the child the state it would have had without hpusim's late import: a backward on
  // a multithreaded thread fails loudly instead of waiting on a queue no thread serves.
  if (g_added) {
    EngineQueues::of(Engine::get_default_engine()).resize(g_engine_queues);
  }
}

}  // namespace
}  // namespace hpusim_glue

extern "C" {
// Make sure the autograd engine has a ready queue and worker thread for every hpu device
// index. Returns the number of device queues afterwards, or -1 if the engine refused
// (e.g. in a child forked after autograd threads started, where torch raises too).
int hpusim_glue_autograd_device_queues(void) {
  using namespace hpusim_glue;
  try {
    auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::HPU);
    const size_t needed = static_cast<size_t>(impl->deviceCount());
    Engine& engine = Engine::get_default_engine();
    // Runs the engine's one-time start-up now if no backward has run yet: the hpu guard is
    // registered, so the engine counts hpu devices itself and nothing is left to add.
    engine.initialize_device_threads_pool();
    std::lock_guard<std::mutex> lock(g_grow_mutex);
    auto& queues = EngineQueues::of(engine);
    if (queues.size() >= needed) {
      return static_cast<int>(queues.size());
    }
    if (!g_added) {
      g_engine_queues = queues.size();
      g_added = true;
      pthread_atfork(nullptr, nullptr, forget_added_queues_in_child);
    }
    // Queues first (a worker reads its queue through the vector only via its own copy of
    // the shared pointer), then one detached worker per new index, as the engine does.
    const size_t first = queues.size();
    queues.reserve(needed);
    for (size_t i = first; i < needed; ++i) {
      queues.push_back(std::make_shared<ReadyQueue>());
    }
    for (size_t i = first; i < needed; ++i) {
      std::thread worker(&Engine::thread_init, &engine, static_cast<int>(i), queues[i], true);
      worker.detach();
    }
    return static_cast<int>(queues.size());
  } catch (...) {
    return -1;
  }
}
}
