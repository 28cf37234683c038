// `--html FILE` (issue 30): the report is written for plan and check, is self-contained (nothing
// fetched: no URL in any src/href, a Content-Security-Policy that forbids fetches), embeds the
// command's own --json answer unchanged, and follows the output-file rules of --emit (an existing
// file only with --force; a user error is one line, exit 2). The browser renders it in
// python/tests/browser_html.py (ctest python_wheel).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"

namespace {

using zeroplan::testing::run_cli;
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON inside <script type="application/json" id="zeroplan-data">, with the "<\/" escape undone.
nlohmann::json embedded(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"zeroplan-data\">";
  const auto a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  const auto b = html.find("</script>", a);
  std::string text = html.substr(a + open.size(), b - a - open.size());
  for (size_t i = text.find("<\\/"); i != std::string::npos; i = text.find("<\\/", i))
    text.replace(i, 3, "</");
  return nlohmann::json::parse(text);
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("zeroplan_html_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TEST(CliHtml, PlanReportEmbedsTheJsonAnswerAndLoadsNothing) {
  const fs::path d = temp_dir();
  const std::string path = (d / "plan.html").string();
  fs::remove(path);
  const auto r = run_cli({"--model", "13b", "--gpus", "4xA40", "--html", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Wrote the HTML report " + path), std::string::npos);
  const std::string html = read(path);
  // Offline: no external reference of any kind, and the page's policy forbids fetches.
  for (const char* bad : {"src=\"http", "href=\"http", "src='http", "@import", "url(http"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  const nlohmann::json data = embedded(html);
  const auto j = run_cli({"--model", "13b", "--gpus", "4xA40", "--json"});
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_EQ(data["answer"], nlohmann::json::parse(j.out));
  // One shown plan per stage, the recommended one marked, each with its buffers and a sweep whose
  // point at the plan's own micro-batch is the plan itself (the same evaluation as the search).
  ASSERT_EQ(data["plans"].size(), data["answer"]["plans"].size());
  int marked = 0;
  for (const auto& p : data["plans"]) {
    marked += p["recommended"].get<bool>();
    int64_t live = 0;
    for (const auto& b : p["buffers"])
      if (b["phases"][p["peak_phase"].get<int>()].get<bool>()) live += b["bytes"].get<int64_t>();
    EXPECT_EQ(live, p["peak"].get<int64_t>()) << p["label"];
    const auto& at = p["sweep"][p["micro_batch"].get<int>() - 1];
    EXPECT_EQ(at["peak"], p["peak"]) << p["label"];
    EXPECT_EQ(at["tokens_per_s"], p["tokens_per_s"]) << p["label"];
  }
  EXPECT_EQ(marked, 1);
  fs::remove_all(d);
}

TEST(CliHtml, ExistingFileNeedsForce) {
  const fs::path d = temp_dir();
  const std::string path = (d / "keep.html").string();
  { std::ofstream(path) << "mine"; }
  const auto r = run_cli({"--model", "7b", "--gpus", "4xA40", "--html", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(read(path), "mine");
  const auto f = run_cli({"--model", "7b", "--gpus", "4xA40", "--html", path, "--force"});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(read(path).find("zeroplan-data"), std::string::npos);
  fs::remove_all(d);
}

TEST(CliHtml, CheckReportShowsTheConfigAndTheRefusal) {
  const fs::path d = temp_dir();
  const std::string cfg = std::string(ZEROPLAN_SOURCE_DIR) + "/configs/examples/13b-4xA40-zero3.json";
  const std::string path = (d / "check.html").string();
  const auto r = run_cli({"check", cfg, "--model", "13b", "--gpus", "4xA40", "--html", path});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  const nlohmann::json data = embedded(read(path));
  EXPECT_EQ(data["kind"], "check");
  ASSERT_GE(data["plans"].size(), 1u);
  EXPECT_EQ(data["plans"][0]["label"], "your config");
  EXPECT_EQ(data["plans"][0]["peak"], data["answer"]["predicted"]["memory"]["gpu"]["peak"]);

  // A config DeepSpeed refuses: no prediction, so no plan in the report, but its issues are there.
  const std::string bad = (d / "bad.json").string();
  { std::ofstream(bad) << R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 7}})"; }
  const std::string refused = (d / "refused.html").string();
  const auto b = run_cli({"check", bad, "--model", "7b", "--gpus", "2xA40", "--html", refused});
  EXPECT_EQ(b.exit_code, 1) << b.err;
  const nlohmann::json rd = embedded(read(refused));
  EXPECT_EQ(rd["answer"]["verdict"], "refused");
  EXPECT_TRUE(rd["plans"].empty());
  EXPECT_FALSE(rd["reasons"].empty());
  fs::remove_all(d);
}

}  // namespace

namespace {

TEST(CliHtml, DiagnoseReportShowsTheRunAndItsCauses) {
  const fs::path d = temp_dir();
  const std::string log = std::string(ZEROPLAN_SOURCE_DIR) + "/tests/diagnose/z2_tiny_buckets.log";
  const std::string path = (d / "diagnose.html").string();
  const auto r = run_cli({"diagnose", log, "--model", "7b", "--gpus", "4xA40", "--html", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json data = embedded(read(path));
  const auto j = run_cli({"diagnose", log, "--model", "7b", "--gpus", "4xA40", "--json"});
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_EQ(data["kind"], "diagnose");
  EXPECT_EQ(data["answer"], nlohmann::json::parse(j.out));
  ASSERT_EQ(data["plans"].size(), 1u);  // the run as its config runs it
  EXPECT_EQ(data["plans"][0]["peak"], data["answer"]["predicted"]["peak_bytes"]);
  // Every ranked cause is among the reasons, in order, with its fix.
  ASSERT_FALSE(data["answer"]["causes"].empty());  // this log has a cause (tiny buckets)
  ASSERT_GE(data["reasons"].size(), data["answer"]["causes"].size());
  for (size_t i = 0; i < data["answer"]["causes"].size(); ++i)
    EXPECT_EQ(data["reasons"][i].get<std::string>().rfind(
                  data["answer"]["causes"][i]["title"].get<std::string>(), 0),
              0u);
  fs::remove_all(d);
}

}  // namespace
