//===- Stats.cpp - what the emulator ran, as --emu-stats JSON -------------===//
#include "ptxemu/Emulator.h"

#include <sstream>

namespace comfyquant::ptxemu {

namespace {
std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out + "\"";
}
} // namespace

std::string Emulator::statsJson(const std::string &arch) const {
  std::ostringstream o;
  o << "{\"arch\": " << quote(arch) << ", \"kernels\": [";
  bool first = true;
  for (const KernelStats &k : stats_) {
    o << (first ? "\n  " : ",\n  ") << "{\"name\": " << quote(k.name)
      << ", \"grid\": [" << k.grid[0] << ", " << k.grid[1] << ", " << k.grid[2]
      << "], \"block\": [" << k.block[0] << ", " << k.block[1] << ", "
      << k.block[2] << "], \"launches\": " << k.launches
      << ", \"warp_instructions\": {";
    bool f2 = true;
    uint64_t total = 0;
    std::map<std::string, uint64_t> byName;
    for (size_t i = 0; i < k.opcodeCounts.size(); ++i)
      if (k.opcodeCounts[i])
        byName[(*k.opcodeNames)[i]] += k.opcodeCounts[i];
    for (auto &[op, n] : byName) {
      o << (f2 ? "" : ", ") << quote(op) << ": " << n;
      f2 = false;
      total += n;
    }
    o << "}, \"warp_instructions_total\": " << total
      << ", \"thread_instructions\": " << k.threadInstructions
      << ", \"tensor_instructions\": " << k.tensorInstructions
      << ", \"tensor_macs\": " << k.tensorMacs
      << ", \"global_load_bytes\": " << k.globalLoadBytes
      << ", \"global_store_bytes\": " << k.globalStoreBytes
      << ", \"global_load_instructions_by_width\": {";
    f2 = true;
    for (auto &[w, n] : k.globalLoadsByWidth) {
      o << (f2 ? "" : ", ") << "\"" << w << "\": " << n;
      f2 = false;
    }
    o << "}, \"shared_load_bytes\": " << k.sharedLoadBytes
      << ", \"shared_store_bytes\": " << k.sharedStoreBytes
      << ", \"barriers\": " << k.barriers
      << ", \"benign_races\": " << k.benignRaces
      << ", \"uninit_shared_reads\": " << k.uninitSharedReads
      << ", \"hazards\": []}";
    first = false;
  }
  o << "\n]}\n";
  return o.str();
}

} // namespace comfyquant::ptxemu
