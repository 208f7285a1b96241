// `cgad codebook`: the 8-bit maps the fast path quantizes optimizer state with (signed for first moments and
// momentum; unsigned for second moments, and its zero-free variant for --v-map zero-free), so anyone can compare
// them with bitsandbytes' (and the zero-free one with Li, Chen & Zhu's DE-0; q8_maps.hpp).
// Every code is printed exactly: as the shortest decimal that reads back to the same float, and as hexfloat.
#include "commands.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/reference/real.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

namespace cgad::cli {
namespace {

std::string hexfloat(float x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%a", static_cast<double>(x));
  return buffer;
}

void run_codebook(bool json) {
  using fastpath::dynamic_map;
  using fastpath::Q8MapKind;
  const fastpath::Q8Map& signed_map = dynamic_map(Q8MapKind::signed_map);
  const fastpath::Q8Map& unsigned_map = dynamic_map(Q8MapKind::unsigned_map);
  const fastpath::Q8Map& zero_free_map = dynamic_map(Q8MapKind::unsigned_zero_free);
  const char* source =
      "bitsandbytes create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), releases 0.44.0-0.50.1, "
      "torch.linspace evaluated element by element in float32; zero-free: the unsigned map with code 0 set to "
      "code 1 (DE-0, Li, Chen & Zhu 2023)";
  if (json) {
    nlohmann::json out{{"source", source}, {"block_size", fastpath::kQ8BlockSize}};
    for (const auto& [name, map] : {std::pair{"signed", &signed_map}, std::pair{"unsigned", &unsigned_map},
                                    std::pair{"zero_free", &zero_free_map}}) {
      nlohmann::json codes = nlohmann::json::array();
      nlohmann::json hex = nlohmann::json::array();
      for (int k = 0; k < fastpath::kQ8Codes; ++k) {
        codes.push_back(core::to_decimal(map->code[k]));
        hex.push_back(hexfloat(map->code[k]));
      }
      out[name] = {{"codes", codes}, {"hex", hex}};
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "q8 dynamic maps (" << source << ")\n";
  std::cout << std::setw(5) << "index"
            << "  " << std::left << std::setw(16) << "signed" << std::setw(18) << "(hex)" << std::setw(16) << "unsigned"
            << std::setw(18) << "(hex)" << std::setw(16) << "zero-free"
            << "(hex)\n"
            << std::right;
  for (int k = 0; k < fastpath::kQ8Codes; ++k) {
    std::cout << std::setw(5) << k << "  " << std::left << std::setw(16) << core::to_decimal(signed_map.code[k])
              << std::setw(18) << hexfloat(signed_map.code[k]) << std::setw(16)
              << core::to_decimal(unsigned_map.code[k]) << std::setw(18) << hexfloat(unsigned_map.code[k])
              << std::setw(16) << core::to_decimal(zero_free_map.code[k]) << hexfloat(zero_free_map.code[k]) << "\n"
              << std::right;
  }
}

}  // namespace

void add_codebook_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command =
      app.add_subcommand("codebook", "The fast path's q8 maps (signed for m; unsigned or zero-free for v)");
  command->add_flag("--json", *json, "print JSON instead of a table");
  command->callback([json] { run_codebook(*json); });
}

}  // namespace cgad::cli
