#include "cgad/fastpath/detail/tensor_table.hpp"

#include "cgad/fastpath/detail/host_state.hpp"

#include <algorithm>

namespace cgad::fastpath {
namespace {

std::string tensor_name(std::size_t k) {
  return "tensor " + std::to_string(k);
}

}  // namespace

std::vector<std::size_t> tensor_begins(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> begin(sizes.size() + 1, 0);
  for (std::size_t k = 0; k < sizes.size(); ++k) begin[k + 1] = begin[k] + sizes[k];
  return begin;
}

std::vector<std::size_t> chunk_tensors(const StepPlanner& planner, const std::vector<std::size_t>& tensor_begin) {
  // Chunks come in element order (fragment by fragment, each in order), so one walk over the tensors finds each
  // chunk's, skipping empty tensors.
  std::vector<std::size_t> out;
  out.reserve(planner.chunks().size());
  std::size_t k = 0;
  for (const StepChunk& c : planner.chunks()) {
    while (tensor_begin[k + 1] <= c.begin) ++k;
    out.push_back(k);
  }
  return out;
}

std::vector<std::size_t> tensor_first_chunks(const std::vector<std::size_t>& chunk_tensor, std::size_t tensors) {
  // Chunks come in element order, so each tensor's are consecutive.
  std::vector<std::size_t> first(tensors + 1, chunk_tensor.size());
  for (std::size_t c = chunk_tensor.size(); c-- > 0;) first[chunk_tensor[c]] = c;
  for (std::size_t k = tensors; k-- > 0;) first[k] = std::min(first[k], first[k + 1]);
  return first;
}

std::vector<std::size_t> tensor_first_slots(const StepPlanner& planner, const std::vector<std::size_t>& chunk_tensor,
                                            std::size_t tensors) {
  // A tensor's absmax or fallback slots are consecutive too, from its first chunk's.
  std::vector<std::size_t> first(tensors, 0);
  for (std::size_t c = chunk_tensor.size(); c-- > 0;) first[chunk_tensor[c]] = planner.chunks()[c].slot;
  return first;
}

TensorStateShape tensor_state_shape(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk,
                                    std::size_t k) {
  const std::vector<std::size_t>& sizes = planner.tensor_sizes();
  if (k >= sizes.size()) {
    throw core::InputError(tensor_name(k) + " does not exist (there are " + std::to_string(sizes.size()) + ")");
  }
  TensorStateShape out;
  out.moments = planner.moments();
  out.values = sizes[k];
  switch (planner.config().state) {
    case StateFormat::fp32:
      out.kind = "fp32";
      break;
    case StateFormat::bf16:
      out.kind = "bf16";
      break;
    case StateFormat::q8:
      if (sizes[k] < effective_min_q8_size(planner.config())) {
        out.kind = "fp32-fallback";
      } else {
        out.kind = "q8";
        out.absmax = first_chunk[k + 1] - first_chunk[k];
        for (int m = 0; m < out.moments; ++m) out.initial_code[m] = initial_code(m, planner);
      }
      break;
  }
  return out;
}

TensorState tensor_state_entry(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk, std::size_t k,
                               std::span<void* const> buffers) {
  const TensorStateShape s = tensor_state_shape(planner, first_chunk, k);
  if (buffers.size() != static_cast<std::size_t>(2 * s.moments)) {
    throw core::InputError(tensor_name(k) + "'s state takes " + std::to_string(2 * s.moments) +
                           " buffer pointers (values and absmax per moment), got " + std::to_string(buffers.size()));
  }
  const auto need = [&](void* p, std::size_t n) {
    if (p == nullptr && n != 0) throw core::InputError(tensor_name(k) + "'s state has a null buffer");
    return p;
  };
  TensorState out;
  out.moments = s.moments;
  out.fp32_fallback = s.kind == "fp32-fallback";
  for (int m = 0; m < s.moments; ++m) {
    void* values = need(buffers[2 * m], s.values);
    switch (planner.config().state) {
      case StateFormat::fp32:
        out.fp32[m] = {static_cast<float*>(values), s.values};
        break;
      case StateFormat::bf16:
        out.bf16_values[m] = {static_cast<bf16*>(values), s.values};
        break;
      case StateFormat::q8:
        if (out.fp32_fallback) {
          out.fp32[m] = {static_cast<float*>(values), s.values};
        } else {
          out.codes[m] = {static_cast<std::uint8_t*>(values), s.values};
          out.absmax[m] = {static_cast<float*>(need(buffers[2 * m + 1], s.absmax)), s.absmax};
        }
        break;
    }
  }
  return out;
}

void check_state_shapes(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk,
                        const std::vector<std::size_t>& chunk_tensor, std::span<const TensorState> states,
                        std::span<const float* const> grads, std::size_t fragment) {
  const std::size_t tensors = first_chunk.size() - 1;
  if (states.size() != tensors) {
    throw core::InputError("the tensor table has " + std::to_string(states.size()) + " states, the optimizer " +
                           std::to_string(tensors) + " tensors");
  }
  const StateFormat format = planner.config().state;
  const auto [first, last] = touched_tensors(planner, chunk_tensor, fragment);
  for (std::size_t k = first; k <= last && k < tensors; ++k) {
    if (!grads.empty() && grads[k] == nullptr) continue;  // left out: its state is not read
    const TensorStateShape s = tensor_state_shape(planner, first_chunk, k);
    const TensorState& e = states[k];
    bool fits = e.moments == s.moments && e.fp32_fallback == (s.kind == "fp32-fallback");
    for (int m = 0; fits && m < s.moments; ++m) {
      const bool fp32 = format == StateFormat::fp32 || e.fp32_fallback;
      const bool bf16_state = format == StateFormat::bf16;
      fits = e.fp32[m].size() == (fp32 ? s.values : 0) && e.bf16_values[m].size() == (bf16_state ? s.values : 0) &&
             e.codes[m].size() == (!fp32 && !bf16_state ? s.values : 0) && e.absmax[m].size() == s.absmax;
    }
    if (!fits) {
      throw core::InputError(tensor_name(k) + "'s state is not of the shape its layout and state format give (" +
                             std::string(s.kind) + ", " + std::to_string(s.values) + " values)");
    }
  }
}

std::vector<TableLaunch> table_launches(const std::vector<std::size_t>& chunk_tensor, std::size_t first,
                                        std::size_t end, std::size_t batch) {
  std::vector<TableLaunch> out;
  for (std::size_t c = first; c < end;) {
    TableLaunch launch{c, c, chunk_tensor[c], chunk_tensor[c]};
    while (launch.end_chunk < end && chunk_tensor[launch.end_chunk] < launch.first_tensor + batch) ++launch.end_chunk;
    launch.end_tensor = chunk_tensor[launch.end_chunk - 1] + 1;
    out.push_back(launch);
    c = launch.end_chunk;
  }
  return out;
}

agent::TensorBatch table_batch(const TableLaunch& launch, const std::vector<std::size_t>& tensor_begin,
                               const std::vector<std::size_t>& first_slot, std::span<void* const> params,
                               std::span<const float* const> grads, std::span<const TensorState> states) {
  agent::TensorBatch batch;
  batch.first_tensor = launch.first_tensor;
  for (std::size_t k = launch.first_tensor; k < launch.end_tensor; ++k) {
    const std::size_t at = k - launch.first_tensor;
    batch.begin[at] = tensor_begin[k];
    batch.first_slot[at] = first_slot[k];
    batch.grad[at] = grads[k];
    batch.params[at] = params.empty() ? nullptr : params[k];
    if (states.empty() || grads[k] == nullptr) continue;
    const TensorState& s = states[k];
    for (int m = 0; m < s.moments; ++m) {
      batch.values[m][at] = !s.fp32[m].empty()          ? static_cast<void*>(s.fp32[m].data())
                            : !s.bf16_values[m].empty() ? static_cast<void*>(s.bf16_values[m].data())
                                                        : static_cast<void*>(s.codes[m].data());
      batch.absmax[m][at] = s.absmax[m].data();
    }
  }
  return batch;
}

std::pair<std::size_t, std::size_t> touched_tensors(const StepPlanner& planner,
                                                    const std::vector<std::size_t>& chunk_tensor,
                                                    std::size_t fragment) {
  if (fragment >= planner.config().fragments) return {1, 0};
  const std::size_t first = planner.chunk_begin(fragment), end = planner.chunk_begin(fragment + 1);
  if (first == end) return {1, 0};
  return {chunk_tensor[first], chunk_tensor[end - 1]};
}

}  // namespace cgad::fastpath
