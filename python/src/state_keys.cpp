// `StateKeys`: what cgad.torch's CPU groups remember of the tensors in opt.state, so that a step finds the ones torch
// ops changed since they were taken (cgad/torch/_live.py) in one pass, without a Python bytecode per tensor: per
// parameter k and per name it was made with, the object's identity, its data_ptr() and its _version (every in-place
// op, set_ and resize_ advance it), read through the Python C API -- the module never links libtorch (docs/design.md
// §7, "The two modules"), and these are the same reads a Python caller makes. A recorded entry is stale again when
// any of these differs, when a name is missing or holds no tensor, or (with `with_shape`) when its last named tensor's
// shape is not the parameter's (a parameter reshaped: p.data = p.data.view(...), whose moments follow it).
#include "bindings.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <vector>

namespace py = pybind11;

namespace cgad::python {
namespace {

struct Key {
  std::uintptr_t id = 0;
  unsigned long long data = 0;
  long long version = 0;
  bool operator==(const Key&) const = default;
};

class StateKeys {
 public:
  StateKeys(std::vector<std::vector<py::str>> names, py::object tensor_type, bool with_shape)
      : names_(std::move(names)),
        tensor_type_(std::move(tensor_type)),
        with_shape_(with_shape),
        keys_(names_.size()),
        recorded_(names_.size(), false) {
    if (!PyType_Check(tensor_type_.ptr())) throw py::type_error("StateKeys: tensor_type must be a type");
    for (std::size_t k = 0; k < names_.size(); ++k) {
      if (names_[k].empty()) throw py::value_error("StateKeys: every tensor needs at least one name");
      keys_[k].resize(names_[k].size());
    }
  }

  // The indices k (ascending) whose entry differs from the one last recorded, or was never recorded.
  py::list stale(const py::list& entries, const py::list& params) const {
    check_sizes(entries, params);
    py::list out;
    std::vector<Key> now;
    for (std::size_t k = 0; k < names_.size(); ++k) {
      if (!recorded_[k] || !read(k, entries[k], params[k], now) || now != keys_[k]) out.append(k);
    }
    return out;
  }

  // Takes tensor k's entry as it is now; an entry that does not read (a name missing, no tensor) stays stale.
  void record(std::size_t k, const py::handle& entry, const py::handle& param) {
    if (k >= names_.size()) throw py::index_error("StateKeys.record: no tensor " + std::to_string(k));
    recorded_[k] = read(k, entry, param, keys_[k]);
  }

  void record_all(const py::list& entries, const py::list& params) {
    check_sizes(entries, params);
    for (std::size_t k = 0; k < names_.size(); ++k) record(k, entries[k], params[k]);
  }

 private:
  void check_sizes(const py::list& entries, const py::list& params) const {
    if (entries.size() != names_.size() || params.size() != names_.size()) {
      throw py::value_error("StateKeys: " + std::to_string(entries.size()) + " entries and " +
                            std::to_string(params.size()) + " parameters for " + std::to_string(names_.size()) +
                            " tensors");
    }
  }

  // Tensor k's keys into `out`; false when its entry is not a dict, lacks a name, holds a non-tensor there, or its
  // shape does not follow the parameter's. Only plain tensors are read: a subclass's data_ptr may raise, and
  // the callers refuse or re-check what is not a plain tensor.
  bool read(std::size_t k, const py::handle& entry, const py::handle& param, std::vector<Key>& out) const {
    if (!PyDict_Check(entry.ptr())) return false;
    out.resize(names_[k].size());
    py::object last;
    for (std::size_t i = 0; i < names_[k].size(); ++i) {
      PyObject* found = PyDict_GetItemWithError(entry.ptr(), names_[k][i].ptr());
      if (found == nullptr) {
        if (PyErr_Occurred() != nullptr) throw py::error_already_set();
        return false;
      }
      // A reference of our own: reading data_ptr may run Python code (a tensor subclass) that edits the dict.
      py::object t = py::reinterpret_borrow<py::object>(found);
      if (Py_TYPE(t.ptr()) != reinterpret_cast<PyTypeObject*>(tensor_type_.ptr())) return false;  // no subclass
      const py::object data = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(t.ptr(), data_ptr_name()));
      if (!data) throw py::error_already_set();
      const py::object version = py::reinterpret_steal<py::object>(PyObject_GetAttr(t.ptr(), version_name()));
      if (!version) throw py::error_already_set();
      out[i] = {reinterpret_cast<std::uintptr_t>(t.ptr()), PyLong_AsUnsignedLongLong(data.ptr()),
                PyLong_AsLongLong(version.ptr())};
      if (PyErr_Occurred() != nullptr) throw py::error_already_set();
      last = std::move(t);
    }
    if (!with_shape_) return true;
    const py::object mine = py::reinterpret_steal<py::object>(PyObject_GetAttr(last.ptr(), shape_name()));
    const py::object theirs = py::reinterpret_steal<py::object>(PyObject_GetAttr(param.ptr(), shape_name()));
    if (!mine || !theirs) throw py::error_already_set();
    const int equal = PyObject_RichCompareBool(mine.ptr(), theirs.ptr(), Py_EQ);
    if (equal < 0) throw py::error_already_set();
    return equal == 1;
  }

  static PyObject* data_ptr_name() {
    static PyObject* const name = PyUnicode_InternFromString("data_ptr");
    return name;
  }
  static PyObject* version_name() {
    static PyObject* const name = PyUnicode_InternFromString("_version");
    return name;
  }
  static PyObject* shape_name() {
    static PyObject* const name = PyUnicode_InternFromString("shape");
    return name;
  }

  std::vector<std::vector<py::str>> names_;  // per tensor, the entry's names it keys (in this order)
  py::object tensor_type_;                   // torch.Tensor: the module does not import torch
  bool with_shape_;
  std::vector<std::vector<Key>> keys_;
  std::vector<bool> recorded_;
};

}  // namespace

void bind_state_keys(py::module_& m) {
  py::class_<StateKeys>(m, "StateKeys",
                        "Per tensor k, the identity, data_ptr() and _version of the tensors entries[k][name] for "
                        "each of names[k] when last recorded; stale() lists the k whose entry changed since.")
      .def(py::init<std::vector<std::vector<py::str>>, py::object, bool>(), py::arg("names"), py::arg("tensor_type"),
           py::arg("with_shape"))
      .def("stale", &StateKeys::stale, py::arg("entries"), py::arg("params"))
      .def("record", &StateKeys::record, py::arg("k"), py::arg("entry"), py::arg("param"))
      .def("record_all", &StateKeys::record_all, py::arg("entries"), py::arg("params"));
}

}  // namespace cgad::python
