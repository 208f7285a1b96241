#pragma once
// Where a job starts and what it sends (SimulationSpec::fragment_progress), for the engine (simulation.cpp).
//
// discard (the old model): the job arriving at round r starts from the whole snapshot θ_{r−τ_r}, syncs fragment
// f = r mod P and sends Δ_f = θ_{r−τ_r,f} − x_f; what the job did to the other fragments is thrown away.
//
// keep (default): streaming DiLoCo as torchft implements it — meta-pytorch/torchft, torchft/local_sgd.py at commit
// 7eb7087 (2026-04-03), classes DiLoCo and _StreamingDiLoCoFragment. There every replica trains its whole model
// continuously; every sync_every/P inner steps one fragment is synced: its pseudo-gradient is original − local over
// everything the replica did to that fragment since the fragment's last sync (_save_grads), the outer optimizer
// steps the restored original (restore_parameters, step), original takes the new global value (save_parameters)
// and the local fragment is merged with it, lerp(global, local, fragment_update_alpha) (_merge_parameters) —
// with the default α = 0, the fragment becomes the global value. The other fragments keep their local values.
// Here, per worker k: its own parameters x^k and per fragment the global value o^k_f it last took, kept across
// its jobs. The job arriving at round r (worker k = r mod K, its j = ⌊r/K⌋-th job) syncs fragment
// f = (j + k) mod P — each worker goes through all P fragments in turn (torchft's fragment = step mod P), offset
// by k so that neighbouring rounds sync different fragments; with P = 1 or P | K − 1 this is r mod P. The job:
//   1. takes the global value of the fragment it synced in its previous job, g: x^k_g = o^k_g = θ_{r−τ_r,g} — the
//      freshest server parameters a job that started τ_r rounds ago has (its first job takes all of θ_{r−τ_r}:
//      joining, the worker receives the whole model);
//   2. runs its H inner steps on all of x^k (the fragments not synced keep their local progress);
//   3. sends Δ_f = o^k_f − x^k_f, everything worker k did to fragment f since it last took f's global value.
// With P = 1 this is discard exactly (each job takes all of θ_{r−τ_r}). Deviations from torchft: (a) torchft's
// replicas sync a fragment at the same step and average their pseudo-gradients; here one worker's arrives per
// round, as everywhere in this simulation; (b) the global value is taken at the start of the worker's next job
// (from θ_{r−τ_r}), not at the end of the sync: with τ_r < K that snapshot already holds the worker's own update,
// with τ_r ≥ K it predates it (the job overlap the engine allows, simulation.hpp); (c) fragment_update_alpha is
// 0 (torchft's default) and fragment_sync_delay is the event's τ rather than a number of inner steps.
#include "cgad/core/fragments.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cgad::simulate {

class JobCopies {
 public:
  JobCopies(FragmentProgress mode, std::size_t workers, const core::FragmentLayout& layout, WorkerRounding round);
  // The fragment the job arriving at round r syncs.
  std::size_t fragment(std::int64_t r) const;
  // The parameters worker `k`'s job starts from (step 1), given θ_{r−τ_r} widened: the span the worker trains.
  std::span<float> begin(std::size_t k, std::span<const float> snapshot);
  // Δ for `fragment` (step 3) into `delta` (the fragment's slice), rounded as the worker stores it.
  void end(std::size_t k, std::size_t fragment, std::span<float> delta);
  // Bytes per parameter these copies hold (the engine's memory estimate).
  static double bytes_per_parameter(FragmentProgress mode, std::size_t workers, std::size_t fragments);

 private:
  struct Copy {
    std::vector<float> local, base;       // x^k and o^k
    std::optional<std::size_t> previous;  // the fragment its previous job synced
  };
  bool keep_;
  std::size_t workers_;
  const core::FragmentLayout& layout_;
  WorkerRounding round_;
  std::vector<Copy> copies_;  // one per worker (keep), or one shared by all (discard: nothing outlives a job)
};

}  // namespace cgad::simulate
