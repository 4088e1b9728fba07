// The hpu random generators, made as the bridge makes them (backend/random.cpp): plain CPU
// generators (at::CPUGeneratorImpl, device "cpu") seeded with the CPU default generator's
// current seed. torch.Generator(device="hpu") reaches new_generator() through the HPU hooks'
// getNewGenerator (hpu_glue.cpp), the hooks' getDefaultGenerator returns default_generator(),
// which is also torch.hpu.default_generators[0]. Random ops on hpu draw a (seed, offset) pair
// from such a generator for the Philox kernels (_ops/random_ops.py); being CPU generators, they
// also drive CPU code such as DataLoader's RandomSampler, as on Gaudi.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/utils/pybind.h>

namespace hpusim_random {

at::Generator new_generator() {
  return at::make_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator().current_seed());
}

const at::Generator& default_generator() {
  static at::Generator g = new_generator();
  return g;
}

}  // namespace hpusim_random

PYBIND11_MODULE(_random_C, m) {
  m.doc() = "hpusim's hpu random generators (the HPU hooks' default generator)";
  m.def("default_generator", []() { return hpusim_random::default_generator(); });
}
