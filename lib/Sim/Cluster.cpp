// Cluster files: one flat YAML mapping of the keys below, every one required (a missing constant
// would otherwise be a silent default), each a finite number in its range.
#include "megac/Sim/Cluster.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <cmath>
#include <cstdio>

using namespace llvm;
using namespace megac::sim;

namespace {

/// A number key: where it goes and the range it must lie in.
struct NumberKey {
  const char *key;
  double Cluster::*field;
  double min, max;
};

const NumberKey kNumbers[] = {
    {"peak_tflops_16bit", &Cluster::peakTflops16, 1e-6, 1e6},
    {"peak_tflops_fp32", &Cluster::peakTflops32, 1e-6, 1e6},
    {"gemm_efficiency", &Cluster::gemmEfficiency, 1e-3, 1},
    {"attention_efficiency", &Cluster::attentionEfficiency, 1e-4, 1},
    {"memory_bandwidth_gbps", &Cluster::memoryBandwidthGBps, 1e-3, 1e6},
    {"memory_gib", &Cluster::memoryGiB, 1e-3, 1e6},
    {"kernel_launch_us", &Cluster::kernelLaunchUs, 0, 1e6},
};

/// A whole-number key and its lower bound.
struct CountKey {
  const char *key;
  int64_t Cluster::*field;
  int64_t min;
};

const CountKey kCounts[] = {
    {"devices_per_node", &Cluster::devicesPerNode, 1},
    {"gemm_saturation_rows", &Cluster::gemmSaturation, 0},
    {"gemm_tile_rows", &Cluster::gemmTileRows, 1},
    {"gemm_tile_cols", &Cluster::gemmTileCols, 1},
    {"gemm_tiles_at_once", &Cluster::gemmTilesAtOnce, 0},
};

/// Link keys: "<prefix>_bus_bandwidth_gbps" and "<prefix>_latency_us".
const std::pair<const char *, Link Cluster::*> kLinks[] = {{"intra_node", &Cluster::intraNode},
                                                           {"inter_node", &Cluster::interNode}};

std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

std::vector<std::string> knownKeys() {
  std::vector<std::string> keys = {"name", "device"};
  for (const CountKey &k : kCounts)
    keys.push_back(k.key);
  for (const NumberKey &k : kNumbers)
    keys.push_back(k.key);
  for (auto [prefix, field] : kLinks) {
    keys.push_back(std::string(prefix) + "_bus_bandwidth_gbps");
    keys.push_back(std::string(prefix) + "_latency_us");
  }
  return keys;
}

} // namespace

Expected<Cluster> megac::sim::parseCluster(StringRef yamlText, StringRef where) {
  auto fail = [&](const Twine &message) -> Error {
    return createStringError(inconvertibleErrorCode(), where + ": " + message);
  };
  SourceMgr sm;
  std::string yamlError;
  sm.setDiagHandler(
      [](const SMDiagnostic &d, void *ctx) {
        *static_cast<std::string *>(ctx) =
            (Twine(d.getLineNo()) + ":" + Twine(d.getColumnNo() + 1) + ": " + d.getMessage()).str();
      },
      &yamlError);
  yaml::Stream stream(yamlText, sm);
  yaml::document_iterator doc = stream.begin();
  auto *map = doc == stream.end() || !doc->getRoot() ? nullptr : dyn_cast<yaml::MappingNode>(doc->getRoot());
  if (!map)
    return fail(yamlError.empty() ? "expected a mapping of keys to values (docs/simulate.md lists them)"
                                  : "invalid YAML at " + yamlError);
  StringMap<std::string> raw;
  for (yaml::KeyValueNode &kv : *map) {
    auto *key = dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
    auto *value = dyn_cast_or_null<yaml::ScalarNode>(kv.getValue());
    if (!yamlError.empty())
      return fail("invalid YAML at " + yamlError);
    SmallString<32> keyStorage, valueStorage;
    if (!key)
      return fail("keys must be plain names");
    StringRef k = key->getValue(keyStorage);
    if (!value)
      return fail(k + " must be a single value, not a list or mapping");
    if (!raw.try_emplace(k, value->getValue(valueStorage).str()).second)
      return fail(k + " is given twice");
  }
  if (!yamlError.empty())
    return fail("invalid YAML at " + yamlError);
  const std::vector<std::string> known = knownKeys();
  for (auto &entry : raw)
    if (!llvm::is_contained(known, entry.getKey().str()))
      return fail("unknown key '" + entry.getKey() + "'; the keys are " + join(known, ", "));
  for (const std::string &k : known)
    if (!raw.count(k))
      return fail("missing key '" + k + "'; every constant must be given, with its source in a comment");

  auto number = [&](StringRef key, double min, double max) -> Expected<double> {
    StringRef text = StringRef(raw.find(key)->second).trim();
    double value;
    if (text.getAsDouble(value) || !std::isfinite(value))
      return fail(key + " must be a finite number, got '" + text + "'");
    if (value < min || value > max)
      return fail(key + " is " + text + "; it must be between " + shortNumber(min) + " and " + shortNumber(max));
    return value;
  };
  Cluster c;
  c.name = raw.find("name")->second;
  c.device = raw.find("device")->second;
  for (const NumberKey &k : kNumbers) {
    Expected<double> v = number(k.key, k.min, k.max);
    if (!v)
      return v.takeError();
    c.*k.field = *v;
  }
  for (auto [prefix, field] : kLinks) {
    Expected<double> bw = number(std::string(prefix) + "_bus_bandwidth_gbps", 1e-6, 1e6);
    Expected<double> latency = number(std::string(prefix) + "_latency_us", 0, 1e6);
    if (!bw)
      return bw.takeError();
    if (!latency)
      return latency.takeError();
    (c.*field).busBandwidthGBps = *bw;
    (c.*field).latencyUs = *latency;
  }
  for (const CountKey &k : kCounts) {
    Expected<double> v = number(k.key, double(k.min), double(1 << 30));
    if (!v)
      return v.takeError();
    if (*v != std::floor(*v))
      return fail(Twine(k.key) + " is " + shortNumber(*v) + "; it must be a whole number");
    c.*k.field = static_cast<int64_t>(*v);
  }
  return c;
}

Expected<Cluster> megac::sim::loadCluster(StringRef nameOrPath, StringRef clusterDir) {
  // A bare name is one of the project's cluster files (clusters/NAME.yaml).
  std::string path = nameOrPath.str();
  if (!nameOrPath.contains('/') && !nameOrPath.ends_with(".yaml") && !nameOrPath.empty())
    path = (clusterDir + "/" + nameOrPath + ".yaml").str();
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return createStringError(inconvertibleErrorCode(),
                             "--cluster " + nameOrPath + ": cannot read " + path + " (" + file.getError().message() +
                                 "); give a cluster file or the name of one in " + clusterDir +
                                 " (selene-a100, dgx-h100; docs/simulate.md has the schema)");
  if ((*file)->getBufferSize() > (1 << 20))
    return createStringError(inconvertibleErrorCode(),
                             "--cluster " + nameOrPath + " is over 1 MiB; a cluster file is a few lines of YAML");
  return parseCluster((*file)->getBuffer(), path);
}
