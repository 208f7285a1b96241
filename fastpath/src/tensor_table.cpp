#include "cgad/fastpath/detail/tensor_table.hpp"

namespace cgad::fastpath {

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

std::pair<std::size_t, std::size_t> touched_tensors(const StepPlanner& planner,
                                                    const std::vector<std::size_t>& chunk_tensor,
                                                    std::size_t fragment) {
  if (fragment >= planner.config().fragments) return {1, 0};
  const std::size_t first = planner.chunk_begin(fragment), end = planner.chunk_begin(fragment + 1);
  if (first == end) return {1, 0};
  return {chunk_tensor[first], chunk_tensor[end - 1]};
}

}  // namespace cgad::fastpath
