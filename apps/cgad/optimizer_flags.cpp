#include "optimizer_flags.hpp"

#include "cgad/differential/q8_codes_file.hpp"
#include "cgad/io/input_file.hpp"

namespace cgad::cli {

void add_optimizer_options(CLI::App& command, core::OptimizerOptions& options) {
  command
      .add_option("--optimizer", options.optimizer,
                  "cgad, pa-cgad, adam-decay, adam, nesterov, delayed-nesterov or sdm")
      ->capture_default_str();
  command.add_option("--lr", options.lr, "outer learning rate (default 1e-3 Adam family, 0.7 Nesterov family)");
  command.add_option("--beta1", options.beta1, "Adam beta1 (default 0.9)");
  command.add_option("--beta2", options.beta2, "Adam beta2 (default 0.999)");
  command.add_option("--eps", options.eps, "Adam epsilon (default 1e-8)");
  command.add_option("--weight-decay", options.weight_decay, "decoupled weight decay lambda (default 0)");
  command.add_option("--momentum", options.momentum, "Nesterov momentum mu (default 0.9)");
  command.add_option("--alpha", options.alpha, "gate decay rate alpha")->capture_default_str();
  command.add_option("--tau-cut", options.tau_cut, "gate cutoff tau_cut (integer >= 1)")->capture_default_str();
  command.add_option("--buffer", options.buffer, "Delayed Nesterov buffer N")->capture_default_str();
  command.add_option("--fragments", options.fragments, "PA-CGAD fragments P")->capture_default_str();
  command.add_option("--on-zero-gate", options.on_zero_gate, "apply or skip an event whose sigma is 0")
      ->capture_default_str();
}

std::vector<CLI::Option*> add_fastpath_options(CLI::App& command, fastpath::FastpathOptions& options,
                                               std::vector<InputIdentity>& inputs) {
  return {
      command.add_option("--params", options.params, "fast path: parameter format, fp32 or bf16")
          ->capture_default_str(),
      command.add_option("--state", options.state, "fast path: optimizer state, fp32, bf16 or q8")
          ->capture_default_str(),
      command.add_option("--rounding", options.rounding, "fast path: nearest or stochastic")->capture_default_str(),
      command.add_option("--seed", options.seed, "fast path: stochastic rounding seed")->capture_default_str(),
      command.add_option("--device", options.device, "fast path: cpu or cuda")->capture_default_str(),
      command
          .add_option("--q8-semantics", options.q8_semantics,
                      "fast path: cgad (exact nearest code, v = 0 guard) or bnb (bitsandbytes' 8-bit Adam)")
          ->capture_default_str(),
      command
          .add_option("--v-map", options.v_map,
                      "fast path: q8 second moments' map, dynamic (bitsandbytes', with a 0) or zero-free (DE-0)")
          ->capture_default_str(),
      command.add_option(
          "--min-q8-size", options.min_q8_size,
          "fast path: tensors under this many elements keep fp32 state (default 4096 with bnb, 0 with cgad)"),
      command.add_option_function<std::string>(
          "--q8-maps",
          [&options, &inputs](const std::string& path) {
            io::InputFile file(path);  // cli_support's rule: a regular file, pipe or FIFO, never a wait without end
            options.q8_codes = differential::read_q8_codes(file.stream(), "q8 maps file " + path);
            inputs.push_back({"the --q8-maps file '" + path + "'", file.device(), file.inode()});
          },
          "fast path: q8 state's signed and unsigned maps as data, a JSON file of the shape `cgad codebook --json` "
          "prints (e.g. the maps an installed bitsandbytes builds); default: the built-in maps"),
  };
}

}  // namespace cgad::cli
