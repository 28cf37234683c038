// The example configs in configs/examples/ are what zeroplan writes today: each case of
// configs/examples/cases.txt is regenerated with the real binary and compared byte for byte (run
// scripts/regen_config_examples.sh after a planner change). Then `zeroplan check` on each example
// must reproduce the plan's own prediction: same peak GPU memory and step time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"

using nlohmann::json;
using zeroplan::testing::run_cli;
using zeroplan::testing::slurp;

namespace {

const std::string kExamples = std::string(ZEROPLAN_SOURCE_DIR) + "/configs/examples";

struct Case {
  std::string name;
  std::vector<std::string> flags;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  std::istringstream in(slurp(kExamples + "/cases.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    Case c{line.substr(0, tab), {}};
    std::istringstream fs(line.substr(tab + 1));
    std::string f;
    while (fs >> f) c.flags.push_back(f);
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ConfigExamples, ManifestListsTheSeedCases) {
  const auto cs = cases();
  // ZeRO-1/2/3 on 4xA40, CPU offload, NVMe offload, the HF "auto" variant, multi-node.
  EXPECT_GE(cs.size(), 7u);
}

TEST(ConfigExamples, RegeneratedFilesMatchTheCommittedOnes) {
  for (const auto& c : cases()) {
    char tmpl[] = "/tmp/zp-examples-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const auto r = run_cli(with(c.flags, {"--emit", c.name + ".json"}), dir);
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.err;
    int compared = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      const std::string committed = kExamples + "/" + f;
      ASSERT_TRUE(std::filesystem::exists(committed))
          << committed << " is missing: run scripts/regen_config_examples.sh";
      EXPECT_EQ(slurp(e.path().string()), slurp(committed))
          << committed << " drifted from what zeroplan writes now: run scripts/regen_config_examples.sh";
      ++compared;
    }
    EXPECT_GE(compared, 4) << c.name;
    std::filesystem::remove_all(dir);
  }
}

TEST(ConfigExamples, CheckReproducesThePlansPrediction) {
  for (auto c : cases()) {
    std::erase(c.flags, "--hf-auto");  // an --emit option; the plan and check read the same numbers
    const auto plan = run_cli(with(c.flags, {"--json"}));
    ASSERT_EQ(plan.exit_code, 0) << c.name << ": " << plan.err;
    const json rec = json::parse(plan.out)["recommendation"];
    ASSERT_TRUE(rec.is_object()) << c.name;
    // The HF Trainer takes batch, precision and checkpointing from TrainingArguments: pass them.
    std::vector<std::string> args = {"check", kExamples + "/" + c.name + ".json"};
    args = with(args, c.flags);
    args = with(args, {"--micro-batch", std::to_string(rec["micro_batch"].get<int64_t>()), "--grad-accum",
                       std::to_string(rec["grad_accum"].get<int64_t>()), "--checkpointing",
                       rec["activation_checkpointing"].get<std::string>(), "--precision",
                       rec["precision"].get<std::string>(), "--json"});
    const auto chk = run_cli(args);
    ASSERT_TRUE(chk.exit_code == 0 || chk.exit_code == 1) << c.name << ": " << chk.err;
    const json out = json::parse(chk.out);
    const json& pred = out["predicted"];
    EXPECT_EQ(pred["memory"]["gpu"]["peak"], rec["memory"]["gpu"]["peak"]) << c.name;
    EXPECT_DOUBLE_EQ(pred["time"]["step_s"].get<double>(), rec["time"]["step_s"].get<double>()) << c.name;
    EXPECT_EQ(pred["fits"], true) << c.name;
    // No errors: the NVMe path placeholder is a warning (DeepSpeed creates the directory and runs;
    // tests/deepspeed_configs records emit_s3_offload_nvme as accepted).
    for (const auto& i : out["issues"]) EXPECT_NE(i["severity"], "error") << c.name << ": " << i.dump();
    EXPECT_EQ(chk.exit_code, 0) << c.name << "\n" << chk.out;
  }
}

}  // namespace
