// `replay` and `noise` for Python: the engines of `cgad replay` and `cgad noise` (cgad::differential), called
// as the command calls them. A replay's records come back as the JSON text the command writes, one per event
// (every real as a decimal that reads back to the exact value); the noise run's samples and final state as
// NumPy arrays. The MPFR working precision is process-wide: it is set for the call (reference/real.hpp).
// Both hold the GIL and look for a pending signal (Ctrl-C) between events or steps, through the callbacks the
// engines call for each, so a KeyboardInterrupt ends them within one event's time; the engines know nothing of
// Python.
#include "numerics_bindings.hpp"

#include "cgad/differential/noise_lockstep.hpp"
#include "cgad/differential/q8_codes_file.hpp"
#include "cgad/differential/replay_fastpath.hpp"
#include "cgad/differential/replay_reference.hpp"
#include "cgad/differential/replay_stream.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/reference/real.hpp"

#include "arrays.hpp"
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace py = pybind11;

namespace cgad::python {
namespace {

// Raises the pending signal's exception (KeyboardInterrupt for SIGINT) once its handler has run.
void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// `cgad replay` over a stream given as a file (`path`, under the command's rule for inputs) or as JSON-lines text;
// `q8_maps`, the file `cgad replay --q8-maps` reads, read by the same reader under the same rule.
py::dict replay(const std::optional<std::string>& path, const std::optional<std::string>& text,
                const std::string& backend, const py::dict& optimizer, const py::dict& fastpath, unsigned precision,
                const std::optional<std::string>& q8_maps) {
  if (backend != "reference" && backend != "fastpath") {
    throw core::InputError("backend must be 'reference' or 'fastpath', got '" + backend + "'");
  }
  const unsigned bits = reference::set_working_precision_bits(precision);  // also the precision of the parse
  fastpath::FastpathOptions fast = fastpath_options(fastpath);
  if (q8_maps) {
    io::InputFile maps(*q8_maps);
    fast.q8_codes = differential::read_q8_codes(maps.stream(), "q8 maps file " + *q8_maps);
  }
  std::unique_ptr<io::InputFile> file;
  std::istringstream memory(text.value_or(""));
  std::istream* in = &memory;
  const std::string source = path ? *path : "<stream>";
  if (path) {
    file = std::make_unique<io::InputFile>(*path);
    in = &file->stream();
  }
  differential::StreamReader reader(*in, source);
  std::vector<std::string> records;
  const auto next = [&] {
    check_signals();
    return reader.next();
  };
  const auto sink = [&](const differential::EventRecord& record) { records.push_back(record.dump()); };
  std::ostringstream notes;
  const differential::ReplayCounts counts =
      backend == "reference"
          ? differential::replay_reference(reader.header(), next, source, optimizer_options(optimizer), notes, sink)
          : differential::replay_fastpath(reader.header(), next, source, optimizer_options(optimizer), fast, notes,
                                          sink);
  py::dict out;
  out["records"] = records;
  out["events"] = counts.events;
  out["nonfinite"] = counts.nonfinite;
  out["zero_gate"] = counts.zero_gate;
  out["overflowing"] = counts.overflowing;
  out["notes"] = notes.str();
  out["precision_bits"] = bits;
  return out;
}

py::object array(const std::vector<double>& values) {
  return numpy_copy(std::span<const double>(values));
}

// `cgad noise` for one scenario: the fast path and the MPFR reference in lockstep.
py::dict noise(const py::dict& o, unsigned precision) {
  const unsigned bits = reference::set_working_precision_bits(precision);
  differential::NoiseScenario s;
  const auto text = [&](const char* key) { return option_value<std::string>(o[key], key); };
  differential::parse_study_optimizer(text("optimizer"), s);
  if (o.contains("params")) s.params = fastpath::parse_param_format(text("params"));
  if (o.contains("state")) s.state = fastpath::parse_state_format(text("state"));
  if (o.contains("rounding")) s.rounding = fastpath::parse_rounding(text("rounding"));
  if (o.contains("q8_semantics")) s.q8_semantics = fastpath::parse_q8_semantics(text("q8_semantics"));
  if (o.contains("v_map")) s.v_map = fastpath::parse_v_map(text("v_map"));
  take(o, "min_q8_size", s.min_q8_size);
  take(o, "delays", s.delays);
  take(o, "size", s.size);
  take(o, "steps", s.steps);
  take(o, "log_every", s.log_every);
  take(o, "seed", s.seed);
  take(o, "scale_range", s.scale_range);
  take(o, "zero_fraction", s.zero_fraction);
  if (o.contains("stream") && !o["stream"].is_none()) {
    const std::string path = text("stream");
    io::InputFile in(path);
    s.stream = std::make_shared<const differential::PseudoGradientStream>(differential::read_stream(in.stream(), path));
    s.stream_name = path;
  }
  differential::validate(s);
  differential::check_memory({s});
  const differential::NoiseRun run = differential::run_lockstep(s, [](long, long) { check_signals(); });

  constexpr int kColumns = 19;
  std::vector<double> column[kColumns];
  static constexpr const char* kNames[kColumns] = {"step",
                                                   "v_mean_abs",
                                                   "v_rms",
                                                   "v_max_abs",
                                                   "v_bias",
                                                   "m_mean_abs",
                                                   "m_rms",
                                                   "m_max_abs",
                                                   "m_bias",
                                                   "theta_mean_abs",
                                                   "theta_rms",
                                                   "theta_max_abs",
                                                   "theta_bias",
                                                   "v_zero_fraction",
                                                   "m_zero_fraction",
                                                   "step_over_5lr_fraction",
                                                   "max_step_over_lr",
                                                   "reference_max_step_over_lr",
                                                   "gated_to_zero"};
  for (const auto& x : run.samples) {
    const double row[kColumns] = {static_cast<double>(x.step),
                                  x.v.mean_abs,
                                  x.v.rms,
                                  x.v.max_abs,
                                  x.v.bias,
                                  x.m.mean_abs,
                                  x.m.rms,
                                  x.m.max_abs,
                                  x.m.bias,
                                  x.theta.mean_abs,
                                  x.theta.rms,
                                  x.theta.max_abs,
                                  x.theta.bias,
                                  x.trap.v_zero_fraction,
                                  x.trap.m_zero_fraction,
                                  x.trap.step_over_5lr_fraction,
                                  x.trap.max_step_over_lr,
                                  x.trap.reference_max_step_over_lr,
                                  static_cast<double>(x.gated_to_zero)};
    for (int k = 0; k < kColumns; ++k) column[k].push_back(row[k]);
  }
  py::dict samples;
  for (int k = 0; k < kColumns; ++k) samples[kNames[k]] = array(column[k]);
  py::dict last;
  last["theta_fast"] = array(run.last.theta_fast);
  last["theta_ref"] = array(run.last.theta_ref);
  last["m_fast"] = array(run.last.m_fast);
  last["m_ref"] = array(run.last.m_ref);
  last["v_fast"] = array(run.last.v_fast);
  last["v_ref"] = array(run.last.v_ref);
  // Per tensor of the run's layout (a recorded stream's "tensors"; the synthetic stream is one tensor), the
  // figures of the last sample, each tensor with its own trap counter, as `cgad noise --stream --json` prints them.
  py::list tensors;
  if (!run.samples.empty()) {
    const auto& sample = run.samples.back();
    for (std::size_t t = 0; t < sample.tensors.size(); ++t) {
      const differential::TensorSample& x = sample.tensors[t];
      py::dict d;
      d["size"] = run.tensors[t];
      for (const auto& [name, e] : {std::pair{"v", &x.v}, std::pair{"m", &x.m}, std::pair{"theta", &x.theta}}) {
        const std::string n(name);
        d[(n + "_mean_abs").c_str()] = e->mean_abs;
        d[(n + "_rms").c_str()] = e->rms;
        d[(n + "_max_abs").c_str()] = e->max_abs;
        d[(n + "_bias").c_str()] = e->bias;
      }
      d["v_zero_fraction"] = x.trap.v_zero_fraction;
      d["m_zero_fraction"] = x.trap.m_zero_fraction;
      d["step_over_5lr_fraction"] = x.trap.step_over_5lr_fraction;
      d["max_step_over_lr"] = x.trap.max_step_over_lr;
      d["reference_max_step_over_lr"] = x.trap.reference_max_step_over_lr;
      tensors.append(d);
    }
  }
  py::dict out;
  out["tensors"] = tensors;
  out["scenario"] = differential::scenario_name(run.scenario);
  out["precision_bits"] = bits;
  out["samples"] = samples;
  out["final"] = last;
  return out;
}

}  // namespace

void bind_differential(py::module_& m) {
  m.def("replay", &replay, py::arg("path"), py::arg("text"), py::arg("backend"), py::arg("optimizer"),
        py::arg("fastpath"), py::arg("precision"), py::arg("q8_maps"));
  m.def("noise", &noise, py::arg("options"), py::arg("precision"));
}

}  // namespace cgad::python
