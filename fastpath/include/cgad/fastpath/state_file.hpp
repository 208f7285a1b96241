#pragma once
// The fast path's optimizer state on disk. Little-endian, version 3:
//
//   "CGADFPST"  u32 version = 3
//   u32 optimizer, params format, state format, rounding, on_zero_gate,
//   f32 lr, beta1, beta2, eps, weight_decay, nesterov lr, momentum, alpha, tau_cut   (as raw bits),
//       (alpha and tau_cut, doubles in StepConfig, as the float nearest each: they are compared at float resolution)
//   u32 q8 semantics, u32 v map (0 dynamic, 1 zero-free), u64 seed, u64 min_q8_size (the effective one),
//   u64 parameters, u64 fragments, u64 tensors, tensors × u64 size,
//   u64 applied steps, i64 rounds, fragments × (i64 t, i64 round of the last synchronization or −1)
//   per moment: fp32 → parameters × f32 | bf16 → parameters × u16 |
//               q8 → parameters × u8, q8 chunks × f32 absmax, fallback × f32 (tensors under min_q8_size)
// Version 4 is version 3 with, after the v map word, the q8 maps' codes the state was quantized with: 256 × f32
// signed, 256 × f32 unsigned (StepConfig::q8_codes, as given). It is written only for codes other than the built-in
// ones (q8_maps.hpp), so an optimizer of built-in maps -- given or by default -- writes version 3 as before; a file is
// refused unless its maps (version 4's, else the built-in ones) are the loading optimizer's bit for bit.
// Version 2 is version 3 without the v map word, and loads as the dynamic map (the only one it had); a file of the
// other map than the loading optimizer's is refused, naming both. Version 1 (before q8 semantics, tensor layouts
// and synchronization rounds) is refused: its ages cannot be turned into synchronization rounds.
//   u32 CRC-32 (Boost.CRC crc_32_type, the zlib/PNG polynomial) of every byte before it
//
// CRC-32 detects every error burst of at most 32 bits (a property of any degree-32 CRC whose polynomial has a
// nonzero constant term; Peterson & Brown 1961), so any single corrupted byte is refused.
// The file is written by AtomicFile (atomic_file.hpp: a temporary beside the target, fsync, rename, fsync of the
// directory; only a missing or regular target, or a link to one, is replaced), so a crash leaves either the old
// file or the new one. Loading refuses anything but a regular file (a directory, /dev/zero, a FIFO) and any file
// longer than this optimizer's, before reading it; then it checks length, magic, version, checksum, that the
// configuration and size match the optimizer loading it, and that the contents are a state a step can reach
// (finite moments, v >= 0, finite absmax >= 0). Any failure is an InputError, and nothing in memory changes.
//
// The same bytes also live in memory (save_bytes / load_bytes of either optimizer), for callers that keep the state
// inside their own containers -- the Python package's state_dict(), which torch.save pickles -- with the same checks:
// a file is read into bytes and parsed as those are, and written from them, so there is one format and one parser.
// Users reach it through the optimizers' save/load and save_bytes/load_bytes (fastpath.hpp, cuda_optimizer.hpp);
// the functions behind them, over the planner and the host state, are internals (detail/host_state.hpp).
#include <cstdint>

namespace cgad::fastpath {

inline constexpr std::uint32_t kStateFileVersion = 3;
inline constexpr std::uint32_t kStateFileVersionWithMaps = 4;  // version 3 and the q8 maps (above)

}  // namespace cgad::fastpath
