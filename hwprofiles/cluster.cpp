// parse_cluster: "A40" (one GPU), "4xA40" (one node of 4), "2x8xH100" (2 nodes of 8),
// "8x/path/to/profile.json", "4xCPU" (the executor's thread ranks). Cluster defaults (inter-node
// network, NICs, host memory) come from the GPU profile; each is overridable.
#include "hwprofiles/cluster.h"

#include <cctype>
#include <cmath>

#include "common/checked.h"
#include "common/errors.h"
#include "hwprofiles/profile_json.h"

namespace zeroplan::hw {
namespace {

// Far beyond any real machine; they only stop absurd input early (and keep world_size() in int).
constexpr int64_t kMaxGpusPerNode = 65536;
constexpr int64_t kMaxTotalGpus = 100000;
constexpr int kMaxNicsPerNode = 64;
constexpr size_t kMaxSpecLength = 4096;

// Default NVMe bandwidth for ZeRO-Infinity when --nvme-bw is not given: 3.5 GB/s, the sequential
// read rating of a single PCIe 3.0 x4 datacenter/consumer NVMe SSD (Samsung 970 EVO Plus data sheet:
// "up to 3,500 MB/s" read, 3,300 MB/s write). Deliberately one drive: RAID arrays must be given.
constexpr double kDefaultNvmeGBps = 3.5;
// Default NVMe capacity per node, the same single drive: 2 TB, the largest 970 EVO Plus (data sheet:
// 250 GB, 500 GB, 1 TB, 2 TB). ZeRO-Infinity swaps the offloaded states to files on it
// (swap_tensor/), so a plan whose offloaded bytes exceed it cannot run; larger arrays must be given
// with --nvme-capacity.
constexpr int64_t kDefaultNvmeBytes = 2'000'000'000'000;
// Fallback inter-node network when a profile names none (stated choice, see hwprofiles/README.md).
constexpr std::string_view kFallbackNetwork = "eth-100";

std::string shown(const std::string& spec) {
  return detail::for_message(spec);
}

[[noreturn]] void bad_spec(const std::string& spec, std::string_view why) {
  throw_user_error(
      "invalid --gpus '{}': {}; expected e.g. 4xA40 (one node of 4), 2x8xH100 (2 nodes of 8) or A40",
      shown(spec), why);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_x(char c) {
  return c == 'x' || c == 'X';
}

// A number-like token ("1.5", "-2", "1e3", "+4") followed by 'x': a count that is not a plain
// positive whole number. Returns the token's length, or 0.
size_t numberish_count_length(const std::string& s, size_t pos) {
  size_t i = pos;
  bool digit = false;
  while (i < s.size() &&
         (is_digit(s[i]) || s[i] == '.' || s[i] == '-' || s[i] == '+' || s[i] == 'e' || s[i] == 'E')) {
    digit = digit || is_digit(s[i]);
    ++i;
  }
  return (digit && i < s.size() && is_x(s[i])) ? i - pos : 0;
}

}  // namespace

ClusterSpec parse_cluster(const std::string& raw_spec, const ClusterOverrides& ov) {
  const std::string spec = trim(raw_spec);
  if (spec.empty())
    throw UserError("empty --gpus spec; expected e.g. 4xA40 (one node of 4), 2x8xH100 or A40");
  if (spec.size() > kMaxSpecLength) bad_spec(spec, "the spec is too long");
  if (is_x(spec[0]) && spec.size() > 1 && is_digit(spec[1]))
    bad_spec(spec, "it starts with 'x'; put a count before it");
  if (spec[0] == '-' || spec[0] == '+') bad_spec(spec, "GPU and node counts must be positive whole numbers");
  if (const auto c = spec.find_first_of(",;"); c != std::string::npos)
    bad_spec(spec,
             fmt::format("it contains '{}'; give one GPU type (mixed clusters are not supported)", spec[c]));

  // Up to two leading "<count>x" groups: [nodes x] gpus_per_node x GPU.
  std::vector<int64_t> counts;
  size_t pos = 0;
  while (counts.size() < 3) {
    size_t end = pos;
    while (end < spec.size() && is_digit(spec[end])) ++end;
    if (end == pos || end >= spec.size() || !is_x(spec[end])) break;
    const std::string digits = spec.substr(pos, end - pos);
    if (digits.size() > 9) bad_spec(spec, fmt::format("count {} is absurdly large", shown(digits)));
    const int64_t n = std::stoll(digits);
    if (n == 0) bad_spec(spec, "counts must be at least 1");
    counts.push_back(n);
    pos = end + 1;
  }
  if (counts.size() > 2) bad_spec(spec, "at most two counts are allowed (nodes x GPUs per node x GPU type)");
  if (const size_t len = numberish_count_length(spec, pos); len > 0)
    bad_spec(spec, fmt::format("count '{}' is not a positive whole number", shown(spec.substr(pos, len))));
  const std::string gpu_text = spec.substr(pos);
  if (gpu_text.empty()) bad_spec(spec, "no GPU type after the count");

  ClusterSpec c;
  c.nodes = counts.size() == 2 ? static_cast<int>(counts[0]) : 1;
  const int64_t per_node = counts.empty() ? 1 : counts.back();
  if (per_node > kMaxGpusPerNode)
    bad_spec(spec,
             fmt::format("{} GPUs per node is beyond any real server (max {})", per_node, kMaxGpusPerNode));
  if (static_cast<int64_t>(c.nodes) * per_node > kMaxTotalGpus)
    bad_spec(spec, fmt::format("{} GPUs in total is beyond zeroplan's limit of {}",
                               static_cast<int64_t>(c.nodes) * per_node, kMaxTotalGpus));
  c.gpus_per_node = static_cast<int>(per_node);

  try {
    c.gpu = find_gpu(gpu_text);
  } catch (const UserError& e) {
    throw_user_error("invalid --gpus '{}': {}", shown(spec), e.what());
  }
  c.cpu_backend = c.gpu.is_cpu;

  if (ov.device_memory_bytes) {
    if (*ov.device_memory_bytes <= c.gpu.cuda_context_bytes)
      throw_user_error("--gpu-mem must be larger than the {}'s runtime overhead ({} bytes)", c.gpu.name,
                       c.gpu.cuda_context_bytes);
    c.gpu.memory_bytes = *ov.device_memory_bytes;
  }

  c.intra_node = c.gpu.intra_node;
  if (ov.intra_link) {
    try {
      c.intra_node = find_link(*ov.intra_link);
    } catch (const UserError& e) {
      throw_user_error("--intra-link: {}", e.what());
    }
  }
  const std::string network = ov.inter_link                   ? *ov.inter_link
                              : c.gpu.default_network.empty() ? std::string(kFallbackNetwork)
                                                              : c.gpu.default_network;
  try {
    c.inter_node = find_link(network);
  } catch (const UserError& e) {
    throw_user_error("--network: {}", e.what());
  }

  c.nics_per_node = c.gpu.nics_per_node;
  if (ov.nics_per_node) {
    if (*ov.nics_per_node < 1 || *ov.nics_per_node > kMaxNicsPerNode)
      throw_user_error("--nics must be between 1 and {}, got {}", kMaxNicsPerNode, *ov.nics_per_node);
    c.nics_per_node = *ov.nics_per_node;
  }
  c.network_stated = ov.inter_link.has_value() || ov.nics_per_node.has_value();

  if (ov.host_memory_bytes) {
    if (*ov.host_memory_bytes <= 0) throw UserError("--host-mem must be a positive size, e.g. 512GiB");
    c.host_memory_bytes_per_node = *ov.host_memory_bytes;
  } else if (c.gpu.host_memory_bytes_per_node > 0) {
    // The profile's host RAM is for its typical server (gpu.gpus_per_node GPUs); scale per GPU so
    // "1xH100" does not inherit an 8-GPU server's 2 TiB. Stated rule, see hwprofiles/README.md.
    const double per_gpu =
        static_cast<double>(c.gpu.host_memory_bytes_per_node) / static_cast<double>(c.gpu.gpus_per_node);
    c.host_memory_bytes_per_node =
        static_cast<int64_t>(std::llround(per_gpu * static_cast<double>(per_node)));
  } else {
    // No figure in the profile: 2x the node's device memory, the common sizing rule that leaves
    // room for pinned offload buffers (stated assumption, see hwprofiles/README.md).
    c.host_memory_bytes_per_node = checked_mul(checked_mul(c.gpu.memory_bytes, per_node), 2);
  }

  if (ov.nvme_GBps) {
    if (!std::isfinite(*ov.nvme_GBps) || *ov.nvme_GBps <= 0)
      throw UserError("--nvme-bw must be a positive number of GB/s, e.g. 3.5");
    c.nvme_GBps = *ov.nvme_GBps;
  } else {
    c.nvme_GBps = kDefaultNvmeGBps;
  }
  if (ov.nvme_bytes) {
    if (*ov.nvme_bytes <= 0) throw UserError("--nvme-capacity must be a positive size, e.g. 30TB");
    c.nvme_bytes_per_node = *ov.nvme_bytes;
  } else {
    c.nvme_bytes_per_node = kDefaultNvmeBytes;
  }
  return c;
}

}  // namespace zeroplan::hw
