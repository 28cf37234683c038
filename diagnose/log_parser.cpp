// DeepSpeed log reader. Every format below is cited to the code that prints it (DeepSpeed 0.19.8 as
// installed by scripts/ds_venv.sh; the same strings exist since 0.14 unless noted). Each line is read
// on its own with plain string scanning; a few multi-line blocks (engine configuration dump and its
// JSON, comms summary table, flops profiler summary, ds_report) keep a small state machine that any
// unexpected line ends, so interleaved ranks and truncation lose at most the block they cut.
#include "diagnose/log_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace zeroplan::diagnose {
namespace {

using sv = std::string_view;

// Bounds that keep a hostile or huge log from exhausting memory: a log of 64 MiB (the file limit)
// has at most this many of each record kept; the rest are counted, not stored.
constexpr size_t kMaxRecords = 200'000;
constexpr size_t kMaxJsonBytes = 1 << 20;  // the user-config JSON block (a real one is ~2 KB)
constexpr int64_t kMaxFileBytes = 64LL << 20;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

sv trim(sv s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool contains(sv s, sv what) {
  return s.find(what) != sv::npos;
}

// A decimal number at the start of `s` (after spaces); advances `s` past it.
std::optional<double> take_number(sv& s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return v;
}

std::optional<double> number_at(sv s) {
  return take_number(s);
}

// A count or index read from a log (world size, GPU, channels, hours): kept only when an int holds it,
// so a garbled or hostile number never reaches the undefined double -> int conversion (found by
// fuzz_ds_log: "world_size ... 2.03685e+12").
std::optional<int> as_int(std::optional<double> v) {
  if (!v || !std::isfinite(*v) || *v < -2147483648.0 || *v > 2147483647.0) return std::nullopt;
  return static_cast<int>(*v);
}

// The number after the first occurrence of `key` (which must not be preceded by an identifier
// character, so "MA" does not match inside "Max_MA"), skipping spaces, '=' and ':'.
std::optional<double> number_after(sv line, sv key, size_t* end = nullptr) {
  size_t from = 0;
  while (true) {
    const size_t p = line.find(key, from);
    if (p == sv::npos) return std::nullopt;
    from = p + 1;
    if (p > 0 && is_ident(line[p - 1]) && is_ident(key.front())) continue;
    sv rest = line.substr(p + key.size());
    while (!rest.empty() && (is_space(rest.front()) || rest.front() == '=' || rest.front() == ':'))
      rest.remove_prefix(1);
    const size_t before = rest.size();
    auto v = take_number(rest);
    if (!v) continue;
    if (end) *end = line.size() - rest.size();
    (void)before;
    return v;
  }
}

std::string clip(sv s, size_t n = 300) {
  return std::string(s.substr(0, std::min(n, s.size())));
}

int64_t to_bytes(double v, double unit) {
  const double b = v * unit;
  if (!(b >= 0) || b > 9.0e18) return -1;
  return static_cast<int64_t>(std::llround(b));
}

// Rank from "[Rank N]" (deepspeed/utils/logging.py get_dist_msg), "[rankN]:" (torchrun --tee /
// PyTorch's rank-prefixed tracebacks), "[defaultN]:" (torchrun log prefixes).
int rank_of(sv line) {
  for (sv key : {sv("[Rank "), sv("[rank"), sv("[default")}) {
    const size_t p = line.find(key);
    if (p == sv::npos) continue;
    sv rest = line.substr(p + key.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    int r = 0;
    auto [q, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), r);
    if (ec == std::errc() && q < rest.data() + rest.size() && *q == ']' && r >= 0 && r < 1'000'000) return r;
  }
  return -1;
}

// The message part of a line: after DeepSpeed's logger prefix "[time] [LEVEL] [file:line:func] "
// (utils/logging.py LoggerFactory formatter), after a launcher's "[rankN]:"/"[defaultN]:" prefix,
// and after DeepSpeed's "[Rank N] ".
sv payload(sv line) {
  for (sv lvl : {sv("] [INFO] ["), sv("] [WARNING] ["), sv("] [ERROR] ["), sv("] [DEBUG] [")}) {
    const size_t p = line.find(lvl);
    if (p != sv::npos) {
      const size_t q = line.find("] ", p + lvl.size());
      line = q == sv::npos ? sv() : line.substr(q + 2);
      break;
    }
  }
  if (!line.empty() && line.front() == '[') {
    const size_t q = line.find("]:");
    if (q != sv::npos && q < 24) line = line.substr(q + 2);
  }
  if (line.substr(0, 6) == "[Rank ") {
    const size_t q = line.find("] ");
    if (q != sv::npos && q < 16) line = line.substr(q + 2);
  }
  return line;
}

// convert_size units (deepspeed/utils/comms_logging.py): 1024-based, named B, KB, MB, GB, ...
double convert_size_unit(sv u) {
  static constexpr std::pair<sv, double> kUnits[] = {{"B", 1.0},
                                                     {"KB", 1024.0},
                                                     {"MB", 1024.0 * 1024},
                                                     {"GB", 1024.0 * 1024 * 1024},
                                                     {"TB", 1024.0 * 1024 * 1024 * 1024}};
  for (auto [n, f] : kUnits)
    if (u == n) return f;
  return -1;
}

double mem_unit(sv u) {
  // PyTorch's format_size (c10/cuda/CUDACachingAllocator.cpp): bytes, KiB, MiB, GiB (1024-based).
  static constexpr std::pair<sv, double> kUnits[] = {{"bytes", 1.0},
                                                     {"B", 1.0},
                                                     {"KiB", 1024.0},
                                                     {"MiB", 1024.0 * 1024},
                                                     {"GiB", 1024.0 * 1024 * 1024},
                                                     {"TiB", 1024.0 * 1024 * 1024 * 1024},
                                                     {"KB", 1024.0},
                                                     {"MB", 1024.0 * 1024},
                                                     {"GB", 1024.0 * 1024 * 1024}};
  for (auto [n, f] : kUnits)
    if (u == n) return f;
  return -1;
}

std::vector<sv> split_ws(sv s, size_t max_tokens = 64) {
  std::vector<sv> out;
  size_t i = 0;
  while (i < s.size() && out.size() < max_tokens) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t b = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

// "  key ...... value" / "  long_key  value": a configuration-dump or ds_report entry.
bool dotted_entry(sv p, std::string& key, std::string& value, bool allow_spaces_in_key) {
  p = trim(p);
  size_t i = 0;
  while (i < p.size() && (is_ident(p[i]) || (allow_spaces_in_key && p[i] == ' ' && i + 1 < p.size() &&
                                             p[i + 1] != '.' && p[i + 1] != ' ')))
    ++i;
  if (i == 0 || i >= p.size()) return false;
  sv k = trim(p.substr(0, i));
  sv rest = p.substr(i);
  const size_t spaces = rest.find_first_not_of(' ');
  if (spaces == sv::npos) return false;
  rest.remove_prefix(spaces);
  bool dots = false;
  while (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    dots = true;
  }
  if (!dots && spaces < 2) return false;
  key = std::string(k);
  value = std::string(trim(rest));
  return true;
}

// "stage=3 contiguous_gradients=True offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu',
// ...)" (pydantic BaseModel __repr_str__ of DeepSpeedZeroConfig): top-level key=value pairs.
void parse_kv_repr(sv s, std::map<std::string, std::string>& out) {
  size_t i = 0;
  while (i < s.size() && out.size() < 500) {
    while (i < s.size() && s[i] == ' ') ++i;
    const size_t kb = i;
    while (i < s.size() && is_ident(s[i])) ++i;
    if (i == kb || i >= s.size() || s[i] != '=') {
      while (i < s.size() && s[i] != ' ') ++i;
      continue;
    }
    const std::string key(s.substr(kb, i - kb));
    ++i;
    const size_t vb = i;
    int depth = 0;
    char quote = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        depth = std::max(0, depth - 1);
      } else if (c == ' ' && depth == 0) {
        break;
      }
      ++i;
    }
    out[key] = std::string(s.substr(vb, i - vb));
  }
}

double duration_ms(sv v) {
  sv s = v;
  auto x = take_number(s);
  if (!x) return -1;
  s = trim(s);
  if (s.substr(0, 2) == "ms") return *x;
  if (s.substr(0, 2) == "us") return *x / 1000.0;
  if (s.substr(0, 1) == "s") return *x * 1000.0;
  return -1;
}

class Parser {
 public:
  Parser(RunLog& log, const std::string& source) : log_(log), source_(source) {}

  void line(sv raw, int n) {
    line_no_ = n;
    if (raw.size() > 1'000'000) raw = raw.substr(0, 1'000'000);
    ++log_.lines;
    const bool hit = dispatch(raw);
    if (hit) ++log_.recognized_lines;
    const sv p = trim(payload(raw));
    if (!p.empty()) prev_payload_ = clip(p, 120);
  }

  void finish(bool ends_with_newline) {
    if (json_active_) {
      log_.notes.push_back(
          fmt::format("{}: the engine's JSON config block is cut off (truncated log?)", source_));
      json_active_ = false;
    }
    if (comm_header_seen_ && !comm_rows_)
      log_.notes.push_back(fmt::format("{}: the comms summary table has a header but no rows", source_));
    if (!ends_with_newline && log_.lines > 0)
      log_.notes.push_back(
          fmt::format("{}: the last line has no newline (the log was cut while being written?)", source_));
  }

 private:
  template <typename T>
  void push(std::vector<T>& v, T x) {
    if (v.size() < kMaxRecords) v.push_back(std::move(x));
  }

  void note_rank(int r) {
    if (r < 0) return;
    if (std::find(log_.ranks_seen.begin(), log_.ranks_seen.end(), r) == log_.ranks_seen.end() &&
        log_.ranks_seen.size() < 100'000)
      log_.ranks_seen.push_back(r);
  }

  bool dispatch(sv raw) {
    const sv p = payload(raw);
    const int rank = rank_of(raw);
    note_rank(rank);
    if (continued_block(raw, p)) return true;
    bool hit = engine_line(raw, p, rank);
    hit |= run_line(raw, rank);
    return hit;
  }

  // A line inside a multi-line block opened earlier (the config JSON dump, the comms table, the flops
  // profile, ds_report): true when the block consumed it.
  bool continued_block(sv raw, sv p) {
    if (json_active_) {
      if (json_line(raw, p)) return true;
    }
    if (comm_active_) {
      if (comm_line(p)) return true;
      comm_active_ = false;
    }
    if (flops_active_ > 0) {
      --flops_active_;
      if (flops_line(p)) return true;
    }
    if (report_active_) {
      std::string k, v;
      if (dotted_entry(p, k, v, true) && !contains(raw, "print]")) {
        if (log_.ds_report.size() < 500) log_.ds_report[k] = v;
        if (k == "torch version" && log_.torch_version.empty()) log_.torch_version = v;
        if (k == "deepspeed info" && log_.deepspeed_version.empty())
          log_.deepspeed_version = v.substr(0, v.find(','));
        return true;
      }
      if (!trim(p).empty() && !contains(p, "----") && !contains(p, "op name") && !contains(p, "JIT compiled"))
        report_active_ = false;
    }

    return false;
  }

  // The engine's own lines: timers, memory, throughput, the comms table's header, the config dump.
  bool engine_line(sv raw, sv p, int rank) {
    bool hit = false;
    if (contains(raw, "time (ms)")) hit |= timer_line(raw, rank);
    if (contains(raw, "Max_MA") && contains(raw, "Max_CA")) hit |= memory_line(p);
    if (contains(raw, "[pinned-memory") && contains(raw, " pinned across ")) hit |= pinned_line(raw, rank);
    if (contains(raw, "CPU Virtual Memory")) {
      if (auto u = number_after(raw, "used")) log_.cpu_vm_used_gb = *u;
      if (auto q = number_after(raw, "percent")) log_.cpu_vm_percent = *q;
      hit = true;
    }
    if (contains(raw, "CurrSamplesPerSec=")) {
      if (auto v = number_after(raw, "CurrSamplesPerSec")) push(log_.samples_per_sec, *v);
      MemorySample m;
      m.label = "ThroughputTimer";
      if (auto v = number_after(raw, "MemAllocated")) m.ma_gib = *v;
      if (auto v = number_after(raw, "MaxMemAllocated")) m.max_ma_gib = *v;
      m.line = line_no_;
      if (m.ma_gib >= 0) push(log_.memory, m);
      hit = true;
    }
    // CommsLogger.log_all's main table; its "Breakdown with straggler effect" table (show_straggler)
    // has other columns (straggler latencies, no bandwidth) and is not read.
    if (contains(raw, "Comm. Op") && contains(raw, "Message Size") && !contains(raw, "straggler")) {
      comm_active_ = true;
      comm_header_seen_ = true;
      comm_op_.clear();
      hit = true;
    }
    if (contains(raw, "DeepSpeedEngine configuration")) {
      dump_active_ = true;
      hit = true;
    } else if (contains(raw, "json = {")) {
      json_active_ = true;
      json_text_ = "{";
      json_depth_ = 1;
      dump_active_ = false;
      hit = true;
    } else if (dump_active_ || contains(raw, ":print]")) {
      std::string k, v;
      if (dotted_entry(p, k, v, false)) {
        if (log_.engine_config.size() < 1000) log_.engine_config[k] = v;
        if (k == "zero_config") parse_kv_repr(v, log_.zero_config);
        if (k == "world_size") {
          if (auto w = as_int(number_at(v))) log_.world_size = *w;
        }
        hit = true;
      }
    }
    return hit;
  }

  // The run around the engine: OOMs, tracebacks, NCCL, versions, backend, HF Trainer logs.
  bool run_line(sv raw, int rank) {
    bool hit = false;
    if (contains(raw, "out of memory")) hit |= oom_line(raw, rank);
    if (contains(raw, "File \"") && contains(raw, ", line ")) frame_line(raw);
    if (contains(raw, "NCCL")) hit |= nccl_line(raw);
    if (contains(raw, "DeepSpeed info: version=")) {
      sv s = raw.substr(raw.find("version=") + 8);
      log_.deepspeed_version = std::string(s.substr(0, s.find(',')));
      hit = true;
    }
    if (contains(raw, "backend gloo") || contains(raw, "backend nccl") || contains(raw, "backend ccl") ||
        contains(raw, "backend hccl")) {
      const size_t q = raw.find("backend ");
      log_.backend = std::string(trim(raw.substr(q + 8, raw.find_first_of(" \r\n", q + 8) - q - 8)));
      hit = true;
    }
    if (contains(raw, "Setting accelerator to CPU") || contains(raw, "Setting ds_accelerator to cpu")) {
      log_.cpu_accelerator = true;
      hit = true;
    }
    if (contains(raw, "dp_world_size=")) {
      if (auto v = as_int(number_after(raw, "dp_world_size"))) log_.world_size = *v;
      hit = true;
    }
    // deepspeed/runtime/zero/stage3.py __init__ prints the two stage-3 sizes it uses.
    if (contains(raw, "Reduce bucket size ") || contains(raw, "Prefetch bucket size ")) {
      if (auto v = number_after(raw, "Reduce bucket size"))
        log_.zero_config.emplace("reduce_bucket_size", fmt::format("{:.0f}", *v));
      if (auto v = number_after(raw, "Prefetch bucket size"))
        log_.zero_config.emplace("prefetch_bucket_size", fmt::format("{:.0f}", *v));
      hit = true;
    }
    if (contains(raw, "DeepSpeed Flops Profiler")) {
      flops_active_ = 60;
      hit = true;
    }
    if (contains(raw, "DeepSpeed general environment info") ||
        contains(raw, "DeepSpeed C++/CUDA extension op report")) {
      report_active_ = true;
      hit = true;
    }
    if (contains(raw, "train_samples_per_second") || contains(raw, "train_runtime") ||
        contains(raw, "train_steps_per_second") || contains(raw, "'loss':") || contains(raw, "\"loss\":"))
      hit |= hf_line(raw);
    if (contains(raw, "Traceback (most recent call last)") || contains(raw, "ChildFailedError") ||
        contains(raw, "exits with return code = 1") || contains(raw, "exitcode  : "))
      log_.run_failed = true;
    if (contains(raw, "trimmed by scripts/make_ds_logs.py") || contains(raw, "[... trimmed"))
      log_.notes.push_back(fmt::format("{}:{}: part of the log was cut out here", source_, line_no_));
    return hit;
  }

  // SynchronizedWallClockTimer.log: "time (ms) | name: value | name: value ...". Older versions
  // (<= 0.15) append " | mem_allocated: ... GB" pairs too; names not known here are skipped.
  bool timer_line(sv raw, int rank) {
    sv s = raw.substr(raw.find("time (ms)") + 9);
    TimerSample t;
    t.rank = rank;
    t.line = line_no_;
    bool any = false, micro = false, global = false;
    while (true) {
      const size_t bar = s.find('|');
      if (bar == sv::npos) break;
      s.remove_prefix(bar + 1);
      const size_t colon = s.find(':');
      if (colon == sv::npos) break;
      const sv name = trim(s.substr(0, colon));
      sv rest = s.substr(colon + 1);
      auto v = take_number(rest);
      s = rest;
      // A number must end at a space, '|' or the line's end: "1,5" (a decimal comma) is not one.
      if (!v || (!rest.empty() && !is_space(rest.front()) && rest.front() != '|')) continue;
      double* slot = nullptr;
      // Current names (utils/timer.py FORWARD_MICRO_TIMER = 'fwd_microstep' ...) and the pre-0.10
      // ones ('forward_microstep', 'backward_inner_microstep', ..., 'forward', 'backward', seen in
      // DeepSpeed #255 and gpt-neox #965 logs).
      if (name == "fwd_microstep" || name == "forward_microstep")
        slot = &t.fwd_ms, micro = true;
      else if (name == "bwd_microstep" || name == "backward_microstep")
        slot = &t.bwd_ms, micro = true;
      else if (name == "bwd_inner_microstep" || name == "backward_inner_microstep")
        slot = &t.bwd_inner_ms, micro = true;
      else if (name == "bwd_allreduce_microstep" || name == "backward_allreduce_microstep")
        slot = &t.bwd_allreduce_ms, micro = true;
      else if (name == "step_microstep")
        slot = &t.step_ms, micro = true;
      else if (name == "fwd" || name == "forward")
        slot = &t.fwd_ms, global = true;
      else if (name == "bwd" || name == "backward")
        slot = &t.bwd_ms, global = true;
      else if (name == "bwd_inner" || name == "backward_inner")
        slot = &t.bwd_inner_ms, global = true;
      else if (name == "bwd_allreduce" || name == "backward_allreduce")
        slot = &t.bwd_allreduce_ms, global = true;
      else if (name == "step")
        slot = &t.step_ms, global = true;
      if (slot && *v >= 0) {
        *slot = *v;
        any = true;
      }
    }
    if (!any || (micro && global)) return any;
    t.micro = micro;
    push(log_.timers, t);
    return true;
  }

  // "[pinned-memory TAG] SIZE pinned across N allocations", or "[pinned-memory checkpoint] crossed X:
  // SIZE pinned across N allocations" (run_log.h PinnedSample).
  bool pinned_line(sv raw, int rank) {
    const size_t open = raw.find("[pinned-memory");
    const size_t close = raw.find(']', open);
    const size_t across = raw.find(" pinned across ", close == sv::npos ? open : close);
    if (close == sv::npos || across == sv::npos) return false;
    PinnedSample s;
    s.tag = std::string(trim(raw.substr(open + 14, close - open - 14)));
    sv size = raw.substr(close + 1, across - close - 1);
    if (const size_t colon = size.rfind(':'); colon != sv::npos)
      size = size.substr(colon + 1);  // "crossed X:"
    s.bytes = parse_convert_size(trim(size));
    if (auto n = number_after(raw.substr(across), "across")) s.allocations = static_cast<int64_t>(*n);
    if (s.bytes < 0) return false;
    s.rank = rank;
    s.line = line_no_;
    push(log_.pinned, s);
    return true;
  }

  bool memory_line(sv p) {
    MemorySample m;
    m.line = line_no_;
    if (auto v = number_after(p, "MA")) m.ma_gib = *v;
    if (auto v = number_after(p, "Max_MA")) m.max_ma_gib = *v;
    if (auto v = number_after(p, "CA")) m.ca_gib = *v;
    if (auto v = number_after(p, "Max_CA")) m.max_ca_gib = *v;
    m.label = prev_payload_;
    if (m.max_ma_gib < 0 && m.ma_gib < 0) return false;
    push(log_.memory, m);
    return true;
  }

  // CommsLogger.log_all rows: "<size> <unit> <count> <total> <avg> <tput> <busbw>" under an op name line.
  bool comm_line(sv p) {
    const sv t = trim(p);
    if (t.empty()) return true;
    const auto tok = split_ws(t, 16);
    if (tok.size() == 1 && std::all_of(tok[0].begin(), tok[0].end(), is_ident) && tok[0].front() != '_') {
      comm_op_ = std::string(tok[0]);
      return true;
    }
    if (tok.size() < 6 || comm_op_.empty()) return false;
    // Size: "0B" (one token) or "8.0 KB" (two).
    size_t i = 0;
    int64_t bytes = parse_convert_size(tok[0]);
    if (bytes >= 0) {
      i = 1;
    } else if (tok.size() >= 7) {
      bytes = parse_convert_size(std::string(tok[0]) + " " + std::string(tok[1]));
      i = 2;
    }
    if (bytes < 0 || tok.size() < i + 5) return false;
    double v[5];
    for (int k = 0; k < 5; ++k) {
      auto x = number_at(tok[i + k]);
      if (!x) return false;
      v[k] = *x;
    }
    CommRow r;
    r.op = comm_op_;
    r.message_bytes = bytes;
    r.count = v[0] >= 0 && v[0] < 9e15 ? static_cast<int64_t>(v[0]) : 0;
    r.total_ms = v[1];
    r.avg_ms = v[2];
    r.algbw_gbps = v[3];
    r.busbw_gbps = v[4];
    r.line = line_no_;
    push(log_.comms, r);
    ++comm_rows_;
    return true;
  }

  bool json_line(sv raw, sv p) {
    // A line from another rank's logger inside the block: skip it (the block continues after).
    if (contains(raw, "] [INFO] [") || contains(raw, "] [WARNING] [") || contains(raw, "NCCL INFO"))
      return false;
    sv body = p;
    if (!raw.empty() && raw.front() == '[' && contains(raw.substr(0, 24), "]:")) body = p;
    for (char c : body) {
      if (c == '{' || c == '[') ++json_depth_;
      if (c == '}' || c == ']') --json_depth_;
    }
    json_text_.append(body.data(), body.size());
    json_text_ += '\n';
    if (json_text_.size() > kMaxJsonBytes) {
      json_active_ = false;
      log_.notes.push_back(
          fmt::format("{}:{}: the JSON config block is too large; ignored", source_, line_no_));
      return true;
    }
    if (json_depth_ <= 0) {
      json_active_ = false;
      auto j = nlohmann::json::parse(json_text_, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        log_.notes.push_back(
            fmt::format("{}:{}: the engine's JSON config block did not parse", source_, line_no_));
      else if (!log_.user_config)
        log_.user_config = std::move(j);
    }
    return true;
  }

  void frame_line(sv raw) {
    // Python traceback frames: keep the last DeepSpeed/PyTorch/transformers frame as the OOM's context.
    for (sv pkg : {sv("deepspeed/"), sv("transformers/"), sv("torch/")}) {
      const size_t p = raw.find(pkg);
      if (p == sv::npos) continue;
      const size_t q = raw.find('"', p);
      const size_t in = raw.find(", in ", p);
      std::string file(raw.substr(p, q == sv::npos ? sv::npos : q - p));
      std::string fn = in == sv::npos ? "" : std::string(trim(raw.substr(in + 5)));
      last_frame_ = clip(fn.empty() ? file : file + " in " + fn, 160);
      if (pkg == "deepspeed/") ds_frame_ = last_frame_;
      return;
    }
  }

  bool oom_line(sv raw, int rank) {
    const size_t t = raw.find("Tried to allocate");
    if (t == sv::npos) return false;
    OomEvent o;
    o.rank = rank;
    o.line = line_no_;
    o.text = clip(trim(raw.substr(raw.find("out of memory") > 40 ? raw.find("out of memory") - 40 : 0)));
    o.context = ds_frame_.empty() ? last_frame_ : ds_frame_;
    auto size_at = [&](sv s) -> int64_t {
      s = trim(s);
      auto v = take_number(s);
      if (!v) return -1;
      s = trim(s);
      size_t n = 0;
      while (n < s.size() && (std::isalpha(static_cast<unsigned char>(s[n])))) ++n;
      const double u = mem_unit(s.substr(0, n));
      return u < 0 ? -1 : to_bytes(*v, u);
    };
    o.tried_bytes = size_at(raw.substr(t + 17));
    // PyTorch >= 2.1 wording.
    if (size_t g = raw.find("has a total capacity of"); g != sv::npos) {
      o.total_bytes = size_at(raw.substr(g + 23));
      if (size_t w = raw.find("of which", g); w != sv::npos) o.free_bytes = size_at(raw.substr(w + 8));
      if (size_t gp = raw.rfind("GPU ", g); gp != sv::npos)
        if (auto v = as_int(number_at(raw.substr(gp + 4)))) o.gpu = *v;
    }
    if (size_t a = raw.find("Of the allocated memory"); a != sv::npos)
      o.allocated_bytes = size_at(raw.substr(a + 23));
    if (size_t a = raw.find("and "); a != sv::npos && contains(raw, "reserved by PyTorch but unallocated"))
      o.reserved_unallocated_bytes =
          size_at(raw.substr(raw.find("PyTorch, and ") != sv::npos ? raw.find("PyTorch, and ") + 13 : a + 4));
    // PyTorch < 2.1 wording: "(GPU 0; 4.00 GiB total capacity; 1.68 GiB already allocated; 0 bytes free;
    // ...)".
    if (size_t g = raw.find("(GPU "); g != sv::npos) {
      if (auto v = as_int(number_at(raw.substr(g + 5)))) o.gpu = *v;
      const sv s = raw.substr(g);
      auto field = [&](sv suffix) -> int64_t {
        const size_t e = s.find(suffix);
        if (e == sv::npos) return -1;
        const size_t b = s.rfind(';', e);
        return b == sv::npos ? -1 : size_at(s.substr(b + 1, e - b - 1));
      };
      o.total_bytes = field(" total capacity");
      o.allocated_bytes = field(" already allocated");
      o.free_bytes = field(" free");
    }
    push(log_.ooms, o);
    return true;
  }

  bool nccl_line(sv raw) {
    auto ev = [&](const std::string& k) {
      if (log_.nccl.evidence.size() < 100) log_.nccl.evidence.emplace(k, clip(trim(raw)));
    };
    bool hit = false;
    if (size_t v = raw.find("NCCL version "); v != sv::npos) {
      const sv s = raw.substr(v + 13);
      log_.nccl.version = std::string(s.substr(0, s.find_first_of(" \r\n")));
      hit = true;
    }
    if (!contains(raw, "NCCL INFO") && !contains(raw, "NCCL WARN")) return hit;
    // src/transport.cc / the channel setup prints "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC".
    if (size_t v = raw.find(" via "); v != sv::npos) {
      const sv s = raw.substr(v + 5);
      const sv tr = s.substr(0, s.find_first_of(" \r\n"));
      std::string kind;
      if (tr.substr(0, 3) == "P2P")
        kind = "P2P";
      else if (tr.substr(0, 3) == "SHM")
        kind = "SHM";
      else if (tr.substr(0, 6) == "NET/IB")
        kind = "NET/IB";
      else if (tr.substr(0, 10) == "NET/Socket")
        kind = "NET/Socket";
      else if (tr.substr(0, 4) == "NET/")
        kind = "NET";
      else if (tr.substr(0, 7) == "CollNet")
        kind = "CollNet";
      if (!kind.empty()) {
        ++log_.nccl.transports[kind];
        ev("transport " + kind);
        hit = true;
      }
    }
    if (contains(raw, "NVLS multicast support is available") || contains(raw, "NVLS comm")) {
      log_.nccl.nvls = true;
      ev("nvls");
      hit = true;
    }
    if (contains(raw, "P2P is disabled") || contains(raw, "NCCL_P2P_DISABLE set by environment to 1") ||
        contains(raw, "P2P disabled")) {
      log_.nccl.p2p_disabled = true;
      ev("p2p disabled");
      hit = true;
    }
    // "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:..." / "NET/Socket : Using
    // [0]eth0:10.0.0.1<0>"
    if (contains(raw, "NET/IB : Using") || contains(raw, "NET/Socket : Using")) {
      sv s = raw.substr(raw.find(": Using") + 7);
      const size_t oob = s.find("; OOB");
      if (oob != sv::npos) s = s.substr(0, oob);
      for (sv tkn : split_ws(s, 32)) {
        if (tkn.front() != '[') continue;
        const size_t c = tkn.find(']');
        if (c == sv::npos) continue;
        sv name = tkn.substr(c + 1);
        name = name.substr(0, name.find_first_of("/<"));
        if (contains(raw, "NET/Socket")) name = name.substr(0, name.find(':'));
        if (!name.empty() && log_.nccl.nics.size() < 64) log_.nccl.nics.emplace_back(name);
      }
      ev(contains(raw, "NET/IB") ? "nic ib" : "nic socket");
      hit = true;
    }
    if (contains(raw, "Using network")) {
      ev("network");
      hit = true;
    }
    if (auto c = number_after(raw, "coll channels")) (void)c;
    if (size_t cc = raw.find(" coll channels"); cc != sv::npos) {
      size_t b = cc;
      while (b > 0 && is_digit(raw[b - 1])) --b;
      if (auto v = as_int(number_at(raw.substr(b, cc - b)))) log_.nccl.channels = *v;
      ev("channels");
      hit = true;
    }
    if (auto v = number_after(raw, "nranks"); v && *v > 0 && *v < 1e6) {
      log_.nccl.nranks = std::max(log_.nccl.nranks, static_cast<int>(*v));
      hit = true;
    }
    return hit || contains(raw, "NCCL INFO");
  }

  bool flops_line(sv p) {
    const sv t = trim(p);
    if (contains(t, "Aggregated Profile") || contains(t, "Detailed Profile")) {
      flops_active_ = 0;
      return true;
    }
    const size_t c = t.rfind(": ");
    if (c == sv::npos) return false;
    const std::string key(trim(t.substr(0, c)));
    const std::string val(trim(t.substr(c + 1)));
    if (key.empty() || log_.flops.fields.size() > 100) return false;
    log_.flops.fields[key] = val;
    if (key == "fwd latency") log_.flops.fwd_latency_ms = duration_ms(val);
    if (key == "bwd latency") log_.flops.bwd_latency_ms = duration_ms(val);
    if (key == "step latency") log_.flops.step_latency_ms = duration_ms(val);
    if (key == "iter latency") log_.flops.iter_latency_ms = duration_ms(val);
    if (key == "world size")
      if (auto v = as_int(number_at(val))) log_.flops.world_size = *v;
    return true;
  }

  // HF Trainer: Trainer.log prints the logs dict ({'loss': ..., 'epoch': ...}); at the end
  // {'train_runtime': ..., 'train_samples_per_second': ...}; log_metrics prints "key = value" rows.
  bool hf_line(sv raw) {
    bool hit = false;
    for (sv key : {sv("train_runtime"), sv("train_samples_per_second"), sv("train_steps_per_second"),
                   sv("train_loss"), sv("total_flos")}) {
      const size_t p = raw.find(key);
      if (p == sv::npos) continue;
      sv rest = raw.substr(p + key.size());
      while (!rest.empty() && (rest.front() == '\'' || rest.front() == '"' || is_space(rest.front()) ||
                               rest.front() == ':' || rest.front() == '='))
        rest.remove_prefix(1);
      if (auto v = take_number(rest)) {
        log_.hf_metrics[std::string(key)] = *v;
        hit = true;
      } else if (key == "train_runtime") {
        // log_metrics formats the runtime as H:MM:SS.ss
        int h = 0, m = 0;
        double sec = 0;
        sv s = rest;
        if (auto a = as_int(take_number(s)); a && !s.empty() && s.front() == ':') {
          s.remove_prefix(1);
          if (auto b = as_int(take_number(s)); b && !s.empty() && s.front() == ':') {
            s.remove_prefix(1);
            if (auto c = take_number(s)) {
              h = *a, m = *b, sec = *c;
              log_.hf_metrics["train_runtime"] = h * 3600.0 + m * 60.0 + sec;
              hit = true;
            }
          }
        }
      }
    }
    for (sv key : {sv("'loss':"), sv("\"loss\":")}) {
      if (auto v = number_after(raw, key)) {
        push(log_.losses, *v);
        hit = true;
      }
    }
    return hit;
  }

  RunLog& log_;
  std::string source_;
  int line_no_ = 0;
  std::string prev_payload_;
  bool dump_active_ = false;
  bool json_active_ = false;
  std::string json_text_;
  int json_depth_ = 0;
  bool comm_active_ = false, comm_header_seen_ = false;
  int64_t comm_rows_ = 0;
  std::string comm_op_;
  int flops_active_ = 0;
  bool report_active_ = false;
  std::string last_frame_, ds_frame_;
};

}  // namespace

int64_t parse_convert_size(std::string_view s) {
  s = trim(s);
  if (s == "0B") return 0;
  auto v = take_number(s);
  if (!v || *v < 0) return -1;
  const double u = convert_size_unit(trim(s));
  return u < 0 ? -1 : to_bytes(*v, u);
}

int64_t parse_mem_size(std::string_view s) {
  s = trim(s);
  auto v = take_number(s);
  if (!v || *v < 0) return -1;
  s = trim(s);
  size_t n = 0;
  while (n < s.size() && std::isalpha(static_cast<unsigned char>(s[n]))) ++n;
  const double u = mem_unit(s.substr(0, n));
  return u < 0 ? -1 : to_bytes(*v, u);
}

void parse_log_text(std::string_view text, const std::string& source, RunLog& log) {
  log.files.push_back(source);
  Parser p(log, source);
  int n = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t e = text.find('\n', i);
    if (e == sv::npos) e = text.size();
    sv line = text.substr(i, e - i);
    // tqdm progress bars rewrite one line with '\r': keep the last segment.
    if (const size_t cr = line.rfind('\r'); cr != sv::npos && cr + 1 < line.size())
      line = line.substr(cr + 1);
    p.line(line, ++n);
    i = e + 1;
  }
  p.finish(text.empty() || text.back() == '\n');
}

void parse_log_file(const std::string& path, RunLog& log) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw_user_error("log file '{}' does not exist", path);
  if (!fs::is_regular_file(st)) throw_user_error("'{}' is not a regular file", path);
  const auto size = fs::file_size(path, ec);
  if (ec) throw_user_error("cannot read '{}': {}", path, ec.message());
  if (static_cast<int64_t>(size) > kMaxFileBytes)
    throw_user_error("'{}' is {} MiB; zeroplan diagnose reads logs up to 64 MiB (cut it with tail -c)", path,
                     size >> 20);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_user_error("cannot open '{}'", path);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  parse_log_text(text, path, log);
}

void require_recognized(const RunLog& log) {
  if (log.recognized_lines > 0) return;
  const std::string names = log.files.empty() ? std::string("the input") : log.files.front();
  throw_user_error(
      "{}: no DeepSpeed, PyTorch, NCCL or HF Trainer line found ({} lines read); is this a training log?",
      names, log.lines);
}

}  // namespace zeroplan::diagnose
