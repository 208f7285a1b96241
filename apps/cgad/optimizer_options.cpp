#include "optimizer_options.hpp"

namespace cgad::cli {

void add_optimizer_options(CLI::App& command, OptimizerOptions& options) {
  command.add_option("--optimizer", options.optimizer,
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

fastpath::StepConfig fastpath_step_config(const OptimizerOptions& options) {
  const auto parsed = optimizer_config<float>(options);
  fastpath::StepConfig config;
  config.optimizer = parsed.kind;
  config.adam = parsed.adam;
  config.nesterov = parsed.nesterov;
  config.alpha = parsed.alpha;
  config.tau_cut = parsed.tau_cut;
  config.on_zero_gate = parsed.on_zero_gate;
  config.fragments = parsed.fragments;
  return config;
}

}  // namespace cgad::cli
