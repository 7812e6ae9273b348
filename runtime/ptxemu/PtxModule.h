//===- PtxModule.h - a parsed PTX module, ready to interpret ----*- C++ -*-===//
//
// The PTX emulator's program form. The parser turns PTX text into kernels of
// decoded instructions: every opcode and modifier is resolved once, every
// register is a slot number, every label an instruction index, so that the
// interpreter never looks at text. Anything the emulator does not implement
// is refused while parsing (PtxError names it and the line), never skipped.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_PTXEMU_PTXMODULE_H
#define COMFYQUANT_PTXEMU_PTXMODULE_H

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace comfyquant::ptxemu {

/// A malformed or unsupported PTX input: "<source>:<line>: <message>".
class PtxError : public std::runtime_error {
public:
  explicit PtxError(const std::string &what) : std::runtime_error(what) {}
};

/// Scalar types of instructions and operands.
enum class Ty : uint8_t {
  None, Pred,
  B8, B16, B32, B64, U8, U16, U32, U64, S8, S16, S32, S64,
  F16, F16x2, BF16, BF16x2, F32, F64,
  S16x2, U16x2,
  E4M3, E5M2, E2M1, UE8M0, UE4M3,
};
int tyBytes(Ty t);
bool tyIsSigned(Ty t);
bool tyIsFloat(Ty t);
const char *tyName(Ty t);

enum class Space : uint8_t { None, Global, Shared, Param, Local, Const, Generic };

/// Special registers.
enum class Sreg : uint8_t {
  TidX, TidY, TidZ, NtidX, NtidY, NtidZ, CtaidX, CtaidY, CtaidZ,
  NctaidX, NctaidY, NctaidZ, LaneId, WarpId, NWarpId, SmId, NSmId,
  LaneMaskLt, LaneMaskLe, LaneMaskEq, LaneMaskGe, LaneMaskGt, Clock, Clock64,
  DynSmemSize,
};

struct Operand {
  enum Kind : uint8_t { None, Reg, Imm, Special, Addr, Vec, Label, Symbol };
  Kind kind = None;
  bool negate = false;  // !%p
  uint32_t reg = 0;     // Reg: slot; Addr: base slot (hasBase)
  bool hasBase = false; // Addr: a register base
  int64_t imm = 0;      // Imm bits; Addr: offset (symbol address added)
  Sreg sreg = Sreg::TidX;
  uint32_t label = 0;                 // Label: instruction index
  std::vector<Operand> elems;         // Vec
  int32_t symbol = -1;                // Addr/Symbol: index into Kernel::symbols
};

enum class Op : uint16_t {
  Add, Sub, Mul, Mad, Div, Rem, Min, Max, Neg, Abs, Fma, Rcp, Sqrt,
  And, Or, Xor, Not, Shl, Shr, Cnot, Popc, Clz, Brev,
  Setp, Selp, Mov, Cvt, Cvta, Prmt, Bfe, Bfi,
  Ld, St, Bra, Ret, Exit, BarSync, BarWarpSync,
  Shfl, Vote, MmaSync, Membar, FenceProxyAsync,
  WgmmaFence, WgmmaCommit, WgmmaWait, WgmmaMma,
  MbarInit, MbarTryWait, MbarArrive,
  TcAlloc, TcDealloc, TcRelinquish, TcLd, TcSt, TcWaitLd, TcWaitSt, TcMma,
  TcCommit, TcFence,
  Atom, Red,
  Ldmatrix, CpAsync, CpAsyncCommit, CpAsyncWait,
};

enum class Cmp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, Lo, Ls, Hi, Hs,
                           Equ, Neu, Ltu, Leu, Gtu, Geu, Num, Nan };
enum class Rnd : uint8_t { None, Rn, Rz, Rm, Rp, Rni, Rzi, Rmi, Rpi };

/// A decoded tensor-core operation's shape and kinds.
struct MmaInfo {
  int m = 0, n = 0, k = 0;
  Ty a = Ty::None, b = Ty::None, c = Ty::None, d = Ty::None;
  Ty scale = Ty::None;        // block-scaled: the scale factor type
  int scaleVec = 0;           // mma.sync scale_vec::NX; tcgen05 block16/32
  bool satfinite = false;
  enum Kind : uint8_t { Plain, F16, Tf32, F8F6F4, I8, MxF8F6F4, MxF4NvF4 };
  Kind kind = Plain;
  // tcgen05.ld/st: shape (lanes x bits) and repetitions.
  int lanes = 0, bits = 0, num = 0;
};

struct Instr {
  Op op = Op::Mov;
  Ty type = Ty::None;  // the instruction type (dst type for cvt)
  Ty type2 = Ty::None; // cvt source; add.f32.f16 operand; setp..
  Space space = Space::None;
  Cmp cmp = Cmp::Eq;
  Rnd rnd = Rnd::None;
  uint8_t vec = 1;        // ld/st .v2/.v4
  bool sat = false;       // .sat / .satfinite
  bool wide = false, lo = false, hi = false;
  bool ftz = false;
  bool uni = false;
  bool relu = false;
  uint8_t shflMode = 0; // 0 up 1 down 2 bfly 3 idx
  uint8_t voteMode = 0; // 0 all 1 any 2 uni 3 ballot
  uint8_t boolOp = 0;   // setp combine: 0 none 1 and 2 or 3 xor
  bool trans = false;   // ldmatrix .trans
  /// `.pragma "used_bytes_mask M"` before a load: the bytes it uses (bit i:
  /// byte i); the others may lie outside the object and are not read.
  uint32_t usedBytes = ~0u;
  MmaInfo mma;
  Operand guard;        // @%p / @!%p (kind None when unguarded)
  std::vector<Operand> ops;
  uint32_t line = 0;
  uint16_t opcodeId = 0; // index into Module::opcodes (the full spelling)
};

struct Symbol {
  std::string name;
  Space space = Space::Shared;
  uint64_t offset = 0; // shared: offset in the CTA window; param: offset
  uint64_t bytes = 0;
  uint32_t align = 1;
};

struct Param {
  std::string name;
  uint32_t offset = 0, bytes = 0;
};

struct Kernel {
  std::string name;
  std::vector<Param> params;
  uint32_t paramBytes = 0;
  std::vector<Symbol> symbols; // this kernel's view: params, shared, local
  uint64_t staticShared = 0;   // bytes of .shared declared in the kernel
  uint64_t localBytes = 0;     // per-thread .local
  uint32_t slots = 0;          // register slots
  std::vector<std::string> slotNames;
  std::vector<Instr> code;
  int maxntid[3] = {0, 0, 0};
  uint32_t firstLine = 0;
};

struct Module {
  std::string source; // a name for messages
  std::string target; // "sm_90a"
  int smVersion = 0;  // 90
  bool archSpecific = false; // "a": this arch only
  bool family = false;       // "f": this arch's family from it on
  std::vector<Kernel> kernels;
  std::vector<std::string> opcodes; // full spellings, by Instr::opcodeId
  const Kernel *find(const std::string &name) const;
};

/// Parses PTX text. Throws PtxError naming `source`, the line and what is
/// wrong or unsupported.
Module parsePtx(const std::string &text, const std::string &source);

} // namespace comfyquant::ptxemu

#endif // COMFYQUANT_PTXEMU_PTXMODULE_H
