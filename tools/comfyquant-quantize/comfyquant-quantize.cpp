//===- comfyquant-quantize.cpp - make Comfy quant checkpoints -------------===//
//
//   comfyquant-quantize IN --format F --output OUT [options]
//   comfyquant-quantize IN --inspect | --dry-run [--format F] [--json]
//   comfyquant-quantize --verify-output OUT [--source IN] [--json]
//   comfyquant-quantize --list-formats | --list-architectures
//   comfyquant-quantize IN --write-architecture-template FILE
//
// IN is a .safetensors file, a *.safetensors.index.json or a directory of
// them. The output is written through a temporary file and renamed; it may
// not be an input; an existing one is replaced only with --overwrite; a
// failure leaves nothing behind. Any error: a message naming the file, the
// module and the rule on stderr, exit code 1. docs/Quantize.md.
//===----------------------------------------------------------------------===//

#include "ToolCommandLine.h"

#include "comfyquant/runtime/Error.h"
#include "comfyquant/runtime/OutputFile.h"
#include "comfyquant/runtime/Safetensors.h"
#include "comfyquant/runtime/quantize/Policy.h"
#include "comfyquant/runtime/quantize/Quantizer.h"
#include "comfyquant/version.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rt = comfyquant::rt;
using comfyquant::tools::CommandLine;
using comfyquant::tools::OptionSpec;
using comfyquant::tools::parseCommandLine;
using comfyquant::tools::parseCount;

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "comfyquant-quantize: error: %s\n", msg.c_str());
  return 1;
}

const OptionSpec kOptions[] = {
    {"--format", "F", false, "Target format (see --list-formats)"},
    {"--output", "OUT", false, "Output .safetensors (a directory for a "
                               "directory of separate files)"},
    {"-o", "OUT", false, "Same as --output"},
    {"--overwrite", nullptr, false, "Replace an existing output"},
    {"--list-formats", nullptr, false, "List the formats"},
    {"--list-architectures", nullptr, false,
     "List the architecture policies"},
    {"--inspect", nullptr, false,
     "What is quantizable under the detected policy, with reasons"},
    {"--dry-run", nullptr, false,
     "The plan: each tensor's action and why, bytes before/after; writes "
     "nothing"},
    {"--json", nullptr, false, "JSON instead of text (inspect, dry-run, "
                               "verify, list, summary)"},
    {"--architecture", "NAME", false, "Policy to use (default: detected)"},
    {"--policy", "FILE", true, "An extra policy file (JSON, schema 1)"},
    {"--write-architecture-template", "FILE", false,
     "Write a policy template for IN's tensor names"},
    {"--include", "GLOB", true,
     "Also quantize modules matching GLOB (policy keep rules and shape "
     "rules still apply); with --include only matching modules"},
    {"--exclude", "GLOB", true, "Never quantize modules matching GLOB"},
    {"--components", "diffusion_model|text_encoder", false,
     "Refuse a checkpoint whose policy is another component"},
    {"--convrot-group", "G", false, "ConvRot group (16, 64, 256, ...)"},
    {"--group-size", "G", false, "W4A8 / W6A8 quant group"},
    {"--w4a4-linear-dtype", "int4|int8", false,
     "convrot_w4a4 linear_dtype marker"},
    {"--codebook", "auto|fixed|fit|none", false, "W4A8 codebook choice"},
    {"--s-rel-dtype", "e4m3|f32", false,
     "W4A8 / W6A8: element type of weight_s_rel (default e4m3)"},
    {"--mixed-profile", "size|balanced|quality", false,
     "Candidates and bounds of --format mixed"},
    {"--max-memory", "SIZE", false,
     "Bound on working memory (e.g. 256M, 2G; mapped source pages not "
     "counted)"},
    {"--validate", nullptr, false,
     "Measure every layer; one over its bound keeps source precision"},
    {"--strict", nullptr, false,
     "A layer over its bound or with non-finite values is an error"},
    {"--error-bound", "X", false,
     "Relative-RMSE bound for --validate (default: per format)"},
    {"--verify-output", "OUT", false, "Re-read and check a written file"},
    {"--source", "IN", false, "With --verify-output: compare with IN"},
    {"--optimizer", "none|mse", false, "Scale search (default none)"},
    {"--mse-objective", "weight|activation|auto", false,
     "What --optimizer mse minimises (default auto)"},
    {"--calibration-source", "FILE", false,
     "Safetensors with activation rows [M, K] named by module"},
    {"--mse-steps", "N", false, "Scale candidates tried (default 6)"},
    {"--awq", nullptr, false,
     "NVFP4: search an AWQ pre_quant_scale from --calibration-source"},
    {"--awq-steps", "N", false, "AWQ exponents tried after 0 (default 10)"},
    {"--threads", "T", false, "Threads (default: every available core)"},
    {"--report", "FILE", false, "Write the JSON report to FILE"},
    {"--quiet", nullptr, false, "No progress and no summary line"},
    {"--version", nullptr, false, "Print the comfyquant version"},
    {"--help", nullptr, false, "Print this help (also -h)"},
};

void printHelp() {
  std::fputs(
      "comfyquant-quantize: make a Comfy quant checkpoint\n\n"
      "usage: comfyquant-quantize IN --format F --output OUT [options]\n"
      "       comfyquant-quantize IN (--inspect | --dry-run) [--format F] "
      "[--json]\n"
      "       comfyquant-quantize --verify-output OUT [--source IN] [--json]\n"
      "       comfyquant-quantize --list-formats | --list-architectures\n\n"
      "options:\n",
      stdout);
  for (const OptionSpec &o : kOptions) {
    std::string left = o.name;
    if (o.meta)
      left += std::string("=") + o.meta;
    std::printf("  %-40s %s\n", left.c_str(), o.help);
  }
}

/// "256M", "2G", "1048576", "64K".
bool parseSize(const std::string &s, uint64_t &out) {
  if (s.empty())
    return false;
  uint64_t mult = 1;
  std::string digits = s;
  char last = s.back();
  if (last == 'K' || last == 'k')
    mult = 1ull << 10;
  else if (last == 'M' || last == 'm')
    mult = 1ull << 20;
  else if (last == 'G' || last == 'g')
    mult = 1ull << 30;
  if (mult != 1)
    digits.pop_back();
  int64_t v = 0;
  if (!parseCount(digits, int64_t(1) << 50, v) || v == 0 ||
      uint64_t(v) > (uint64_t(1) << 62) / mult)
    return false;
  out = uint64_t(v) * mult;
  return true;
}

void writeText(const std::string &path, const std::string &text) {
  rt::writeFileAtomically(path, text);
}

int run(int argc, char **argv) {
  CommandLine cl;
  if (std::string err = parseCommandLine(argc, argv, kOptions, cl);
      !err.empty())
    return fail(err);
  if (cl.has("--help")) {
    printHelp();
    return 0;
  }
  if (cl.has("--version")) {
    std::printf("comfyquant %s\n", CQ_VERSION_STRING);
    return 0;
  }
  const bool json = cl.has("--json");
  if (cl.has("--list-formats")) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto &[name, what] : rt::quantizeFormatNames()) {
      if (json)
        j.push_back({{"name", name}, {"description", what}});
      else
        std::printf("%-14s %s\n", name.c_str(), what.c_str());
    }
    if (json)
      std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (cl.has("--list-architectures")) {
    rt::PolicySet set = rt::PolicySet::builtin();
    for (const auto &f : cl.values["--policy"])
      set.addFile(f);
    nlohmann::json j = nlohmann::json::array();
    for (const auto *p : set.policies()) {
      if (json)
        j.push_back({{"name", p->name},
                     {"title", p->title},
                     {"component", p->component},
                     {"origin", p->origin}});
      else
        std::printf("%-16s %-16s %s\n", p->name.c_str(), p->component.c_str(),
                    p->title.c_str());
    }
    if (json)
      std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (cl.has("--verify-output")) {
    if (!cl.file.empty())
      return fail("--verify-output takes the file as its value; no IN");
    int64_t threads = 0;
    if (cl.has("--threads") && !parseCount(cl.get("--threads"), 1024, threads))
      return fail("--threads must be a count");
    double bound = -1;
    if (cl.has("--error-bound")) {
      char *end = nullptr;
      std::string text = cl.get("--error-bound");
      bound = std::strtod(text.c_str(), &end);
      if (!end || *end || !(bound >= 0))
        return fail("--error-bound must be a number >= 0");
    }
    rt::VerifyReport rep = rt::verifyQuantizedOutput(
        cl.get("--verify-output"), cl.get("--source"), bound, int(threads));
    if (json) {
      std::printf("%s\n", rep.toJson().dump(2).c_str());
    } else {
      for (const auto &m : rep.modules) {
        std::printf("%s %s", m["module"].get<std::string>().c_str(),
                    m["format"].get<std::string>().c_str());
        if (m.contains("error"))
          std::printf("  rel_rmse %.5g  max_abs %.5g  cosine %.6f",
                      m["error"]["rel_rmse"].get<double>(),
                      m["error"]["max_abs"].get<double>(),
                      m["error"]["cosine"].get<double>());
        std::printf("\n");
      }
      for (const auto &p : rep.problems)
        std::printf("problem: %s\n", p.c_str());
      std::printf("%s: %zu modules, %s\n", cl.get("--verify-output").c_str(),
                  rep.modules.size(), rep.ok ? "ok" : "FAILED");
    }
    return rep.ok ? 0 : 1;
  }
  if (cl.has("--source"))
    return fail("--source applies only to --verify-output");
  if (cl.file.empty())
    return fail("no input checkpoint (see --help)");

  rt::QuantizeOptions o;
  o.input = cl.file;
  o.format = cl.get("--format");
  o.output = cl.has("--output") ? cl.get("--output") : cl.get("-o");
  if (cl.has("--output") && cl.has("-o"))
    return fail("give --output or -o, not both");
  o.architecture = cl.get("--architecture");
  o.policyFiles = cl.values["--policy"];
  o.include = cl.values["--include"];
  o.exclude = cl.values["--exclude"];
  o.component = cl.get("--components");
  if (!o.component.empty() && o.component != "diffusion_model" &&
      o.component != "text_encoder")
    return fail("--components must be diffusion_model or text_encoder");
  int64_t v = 0;
  if (cl.has("--convrot-group")) {
    if (!parseCount(cl.get("--convrot-group"), 1 << 20, v))
      return fail("--convrot-group must be a power of 4");
    o.convrotGroup = v;
  }
  if (cl.has("--group-size")) {
    if (!parseCount(cl.get("--group-size"), 1 << 20, v))
      return fail("--group-size must be a count");
    o.groupSize = v;
  }
  o.w4a4LinearDtype = cl.get("--w4a4-linear-dtype");
  o.codebook = cl.get("--codebook", "auto");
  o.sRelDtype = cl.get("--s-rel-dtype");
  o.mixedProfile = cl.get("--mixed-profile", "balanced");
  if (cl.has("--max-memory") && !parseSize(cl.get("--max-memory"), o.maxMemory))
    return fail("--max-memory must be a size such as 256M or 2G");
  o.validate = cl.has("--validate");
  o.strict = cl.has("--strict");
  if (cl.has("--error-bound")) {
    char *end = nullptr;
    std::string s = cl.get("--error-bound");
    o.errorBound = std::strtod(s.c_str(), &end);
    if (!end || *end || !(o.errorBound >= 0))
      return fail("--error-bound must be a number >= 0");
  }
  o.overwrite = cl.has("--overwrite");
  if (cl.has("--threads")) {
    if (!parseCount(cl.get("--threads"), 1024, v))
      return fail("--threads must be a count");
    o.threads = int(v);
  }
  o.optimizer = cl.get("--optimizer", "none");
  o.mseObjective = cl.get("--mse-objective", "auto");
  o.calibrationSource = cl.get("--calibration-source");
  o.awq = cl.has("--awq");
  if (cl.has("--awq-steps")) {
    if (!parseCount(cl.get("--awq-steps"), 100, v) || v < 1)
      return fail("--awq-steps must be 1..100");
    o.awqSteps = int(v);
  }
  if (cl.has("--mse-steps")) {
    if (!parseCount(cl.get("--mse-steps"), 64, v) || v < 1)
      return fail("--mse-steps must be 1..64");
    o.mseSteps = int(v);
  }

  if (cl.has("--write-architecture-template")) {
    auto ckpt = rt::Checkpoint::open(o.input);
    std::vector<std::string> weights;
    for (const auto *t : ckpt->tensors())
      if (t->rank() == 2 && t->name.size() > 7 &&
          t->name.compare(t->name.size() - 7, 7, ".weight") == 0)
        weights.push_back(t->name);
    std::string out = cl.get("--write-architecture-template");
    rt::checkNotAnInput(out, rt::checkpointFiles(*ckpt));
    rt::checkOverwrite(out, o.overwrite);
    writeText(out, rt::PolicySet::templateFor(weights, "my-architecture"));
    return 0;
  }

  if (cl.has("--inspect") || cl.has("--dry-run")) {
    if (o.format.empty())
      o.format = "int8";
    if (!o.output.empty())
      return fail("--inspect / --dry-run write nothing: drop --output");
    std::vector<rt::QuantizePlan> plans = rt::planQuantization(o);
    const bool inspect = cl.has("--inspect");
    nlohmann::json all = nlohmann::json::array();
    for (const rt::QuantizePlan &plan : plans) {
      nlohmann::json j = plan.toJson();
      if (inspect)
        j["schema"] = "comfyquant-quantize-inspect";
      if (json) {
        all.push_back(std::move(j));
        continue;
      }
      if (inspect) {
        // What the policy says, format aside.
        std::printf("%s\narchitecture: %s (%s)\n", plan.input.c_str(),
                    plan.policy.c_str(), plan.detection.c_str());
        for (const auto &t : plan.tensors)
          std::printf("%-11s %s: %s\n",
                      t.action == rt::TensorPlan::Action::Keep ? "keep"
                                                               : "quantizable",
                      t.name.c_str(), t.reason.c_str());
      } else {
        std::fputs(plan.toText().c_str(), stdout);
      }
    }
    if (json)
      std::printf("%s\n", (all.size() == 1 ? all[0] : all).dump(2).c_str());
    return 0;
  }

  if (o.output.empty())
    return fail("--output is required");
  const bool tty = isatty(2) && !cl.has("--quiet");
  if (tty)
    o.progress = [](const std::string &line) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    };
  o.report = cl.get("--report");
  rt::QuantizeReport rep = rt::quantizeCheckpoint(o);
  if (tty)
    std::fprintf(stderr, "\n");
  for (const auto &t : rep.plan.tensors)
    if (t.outcome.rfind("kept", 0) == 0)
      std::fprintf(stderr, "comfyquant-quantize: %s %s\n", t.name.c_str(),
                   t.outcome.c_str());
  if (json) {
    nlohmann::json j = rep.toJson();
    j.erase("tensors");
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!cl.has("--quiet")) {
    std::fprintf(stderr,
                 "comfyquant-quantize: %s: %d quantized, %d kept, %d fell back; %llu -> %llu bytes; %.2f s; peak working "
                 "memory %.1f MB (RssAnon +%.1f MB)\n",
                 rep.output.c_str(), rep.quantized, rep.kept, rep.fellBack,
                 (unsigned long long)rep.plan.bytesBefore,
                 (unsigned long long)rep.outputBytes, rep.seconds,
                 rep.peakWorkingBytes / 1e6, rep.peakRssAnonBytes / 1e6);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const rt::Error &e) {
    return fail(e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
