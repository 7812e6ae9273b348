//===- Policy.h - architecture policies of the quantizer --------*- C++ -*-===//
//
// Which tensors of a checkpoint are quantized is data, not code: one JSON
// file per architecture (runtime/policies/, compiled into the library, plus
// any --policy FILE), schema_version 1:
//
//   name, title, component ("diffusion_model" | "text_encoder"),
//   strip_prefixes   name prefixes removed before matching (first match),
//   detect.require   regexes that must each match some tensor name,
//   detect.reject    regexes that no tensor name may match,
//   priority         the highest detected policy wins,
//   include          fragments whose keep lists are appended,
//   quantize         regexes over module names (tensor name less ".weight"),
//   keep             [{match, reason}]: kept in source precision, wins over
//                    quantize,
//   convrot_groupsize [{match, groupsize}]: per-layer ConvRot group.
//
// Detection reads names only (never hidden widths). A checkpoint that no
// policy recognises gets "generic": every 2-D weight the format allows,
// norms, biases and embeddings kept.
//===----------------------------------------------------------------------===//

#ifndef COMFYQUANT_RUNTIME_QUANTIZE_POLICY_H
#define COMFYQUANT_RUNTIME_QUANTIZE_POLICY_H

#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace comfyquant::rt {

struct PolicyPattern {
  std::string text;
  std::regex re;
  std::string reason;     ///< keep rules
  int64_t groupsize = 0;  ///< convrot_groupsize rules
};

struct ArchitecturePolicy {
  std::string name, title, component;
  std::string origin; ///< "built-in" or the file it was read from
  bool fragment = false;
  int priority = 0;
  std::vector<std::string> stripPrefixes;
  std::vector<PolicyPattern> require, reject, quantize, keep, convrotGroups;
  std::vector<std::string> include;
};

/// What a policy says about one tensor.
struct PolicyDecision {
  bool quantize = false;
  std::string module; ///< the module name matched (prefix stripped)
  std::string reason; ///< why (kept: the keep rule's reason)
  int64_t convrotGroup = 0; ///< 0: the format's default
};

class PolicySet {
public:
  /// The built-in policies (runtime/policies/*.json). Throws Error if one
  /// is malformed (a build defect).
  static PolicySet builtin();
  /// Parses one policy file's JSON text; `origin` names it in errors.
  /// Throws Error naming the file and the broken rule.
  void add(const std::string &jsonText, const std::string &origin);
  /// Reads and adds a policy file. A name already present is an error.
  void addFile(const std::string &path);

  /// Non-fragment policies, by name.
  std::vector<const ArchitecturePolicy *> policies() const;
  const ArchitecturePolicy *find(const std::string &name) const;

  /// The detected policy for these tensor names and why ("require ... matched
  /// 'x'"); "generic" when none matches. Ties at the top priority are an
  /// error naming the candidates.
  const ArchitecturePolicy *detect(const std::vector<std::string> &names,
                                   std::string &why) const;

  /// The decision for tensor `name` (a 2-D ".weight") under `policy`,
  /// fragments included.
  PolicyDecision classify(const ArchitecturePolicy &policy,
                          const std::string &name) const;

  /// A template a user edits into a policy of their own, filled from the
  /// tensor names of a checkpoint (every 2-D weight listed for quantize).
  static std::string templateFor(const std::vector<std::string> &weightNames,
                                 const std::string &name);

private:
  std::vector<std::unique_ptr<ArchitecturePolicy>> all_;
};

/// The module name of `tensor` under `policy` (prefix stripped, ".weight"
/// removed), or nullopt when `tensor` does not end in ".weight".
std::optional<std::string> policyModuleName(const ArchitecturePolicy &policy,
                                            const std::string &tensor);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_QUANTIZE_POLICY_H
