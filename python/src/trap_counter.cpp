// `TrapTally`: the fast path's trap counter (fastpath/trap_counter.hpp) for cgad.torch's trap_stats() and
// cgad.peers, so that Python counts steps past 5·lr and stored zeros by the same code as `cgad noise` and
// `cgad simulate` (one limit, one operation order: |after − before| in double, divided by lr).
#include "bindings.hpp"

#include "cgad/fastpath/trap_counter.hpp"
#include "cgad/core/errors.hpp"

#include <pybind11/buffer_info.h>

#include <span>
#include <string>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::TrapTally;

// A one-dimensional, contiguous float32 buffer (a NumPy array, a CPU tensor's .numpy()) as a span.
std::span<const float> float_span(const py::buffer& buffer, const char* what) {
  const py::buffer_info info = buffer.request();
  if (info.format != py::format_descriptor<float>::format() || info.ndim != 1 ||
      (info.size > 1 && info.strides[0] != static_cast<py::ssize_t>(sizeof(float)))) {
    throw core::InputError(std::string(what) + " must be a one-dimensional contiguous float32 buffer");
  }
  return {static_cast<const float*>(info.ptr), static_cast<std::size_t>(info.size)};
}

py::dict counts_dict(const fastpath::TrapCounts& c) {
  py::dict d;
  d["v_zero_fraction"] = c.v_zero_fraction;
  d["m_zero_fraction"] = c.m_zero_fraction;
  d["step_over_5lr_fraction"] = c.step_over_5lr_fraction;
  d["max_step_over_lr"] = c.max_step_over_lr;
  return d;
}

}  // namespace

void bind_trap_counter(py::module_& m) {
  py::class_<TrapTally>(m, "TrapTally", "the steps of a set of elements, counted against 5·lr")
      .def(py::init<>())
      .def(
          "add",
          [](TrapTally& t, const py::buffer& before, const py::buffer& after, double lr) {
            t.add(float_span(before, "before"), float_span(after, "after"), lr);
          },
          py::arg("before"), py::arg("after"), py::arg("lr"),
          "one step of the elements from `before` to `after` (float32) at learning rate lr")
      .def(
          "merge", [](TrapTally& t, const TrapTally& other) { t.add(other); }, py::arg("other"),
          "adds another tally's element-steps")
      .def(
          "counts",
          [](const TrapTally& t, const py::buffer& v, const py::buffer& m) {
            return counts_dict(fastpath::trap_counts(t, float_span(v, "v"), float_span(m, "m")));
          },
          py::arg("v"), py::arg("m"),
          "{v_zero_fraction, m_zero_fraction (the shares of v and m stored as 0, float32), "
          "step_over_5lr_fraction, max_step_over_lr}");
}

}  // namespace cgad::python
