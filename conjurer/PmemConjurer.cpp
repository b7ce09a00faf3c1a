// PmemConjurer: the PM programming rules (Zhang's dissertation, table 4.1) as a Clang
// Static Analyzer checker plugin. docs/design/conjurer.md says what each rule checks.
//
// Model. A pointer is PM when pmemobj_direct (D_RW/D_RO), pmem_map_file or
// pmem_map returned it. pmemobj_direct is evaluated here, not inlined: the same OID (its
// `off` value) gives the same pointer symbol, so a TX_FREE of one copy of a TOID and a
// D_RO of another meet on one region. A transaction is a stage machine driven by
// pmemobj_tx_begin/commit/process/end, and pmemobj_tx_stage answers from it, so the
// TX_BEGIN macro's `while` loop takes exactly the path the library would.
//
// Every finding's message starts with "rule <id>:", which `persim conjure` reads.

#include "clang/AST/Expr.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/StaticAnalyzer/Core/BugReporter/BugReporterVisitors.h"
#include "clang/StaticAnalyzer/Core/BugReporter/BugType.h"
#include "clang/StaticAnalyzer/Core/Checker.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/CallEvent.h"
#include "clang/StaticAnalyzer/Core/PathSensitive/CheckerContext.h"
#include "clang/StaticAnalyzer/Frontend/CheckerRegistry.h"
#include "llvm/ADT/StringSwitch.h"

using namespace clang;
using namespace ento;

namespace {

enum Stage : unsigned { None = 0, Work = 1, OnCommit = 2, OnAbort = 3, Finally = 4 };

// What a transaction knows of an object (a PM pointer symbol).
enum ObjFlag : unsigned {
	Fresh = 1,       // allocated in this transaction (or perhaps): needs no logging
	Uninit = 2,      // pmemobj_tx_alloc'd and not yet stored to
	PendingFree = 4, // freed in this transaction: takes effect at commit
	Freed = 8,       // freed by a committed transaction
};

// A logged range of a PM object, in bits from its start; Whole when not constant.
struct LogRange {
	SymbolRef Base;
	int64_t Lo, Hi;
	bool Whole;
	bool operator==(const LogRange &O) const
	{
		return Base == O.Base && Lo == O.Lo && Hi == O.Hi && Whole == O.Whole;
	}
	bool operator<(const LogRange &O) const
	{
		return std::tie(Base, Lo, Hi, Whole) < std::tie(O.Base, O.Lo, O.Hi, O.Whole);
	}
	void Profile(llvm::FoldingSetNodeID &ID) const
	{
		ID.AddPointer(Base);
		ID.AddInteger(Lo);
		ID.AddInteger(Hi);
		ID.AddBoolean(Whole);
	}
};

} // namespace

// PM pointer symbols.
REGISTER_SET_WITH_PROGRAMSTATE(PmSyms, SymbolRef)
// An OID's `off` symbol -> the pointer symbol pmemobj_direct gives for it.
REGISTER_MAP_WITH_PROGRAMSTATE(OidPtr, SymbolRef, SymbolRef)
// Pointer symbols whose OID is known (rules 2-4 judge only those).
REGISTER_MAP_WITH_PROGRAMSTATE(ObjFlags, SymbolRef, unsigned)
REGISTER_MAP_WITH_PROGRAMSTATE(AllocSite, SymbolRef, const Stmt *)
REGISTER_SET_WITH_PROGRAMSTATE(Logged, LogRange)
// Rule 1: PM regions stored to outside a transaction and not yet flushed -> the store.
REGISTER_MAP_WITH_PROGRAMSTATE(Dirty, const MemRegion *, const Stmt *)
// OIDs pmemobj_reserve gave: a pmemobj_cancel drops them, unflushed stores and all.
REGISTER_SET_WITH_PROGRAMSTATE(Reserved, SymbolRef)
// PM regions a call of this file's was given a pointer to when the analyzer did not follow
// it: an OID read from them may be the call's allocation.
REGISTER_SET_WITH_PROGRAMSTATE(GivenToCall, const MemRegion *)
REGISTER_TRAIT_WITH_PROGRAMSTATE(TxDepth, unsigned)
REGISTER_TRAIT_WITH_PROGRAMSTATE(TxStage, unsigned)
// The top-level function runs in its caller's transaction (it logs or allocates in one
// without beginning one): its frees do not commit at its end.
REGISTER_TRAIT_WITH_PROGRAMSTATE(ImplicitTx, bool)

namespace {

enum class Kind {
	Other,
	Direct,
	MapFile,
	TxBegin,
	TxStage,
	TxCommit,
	TxAbort,
	TxProcess,
	TxEnd,
	TxAddRange,
	TxAddRangeDirect,
	TxAlloc,
	TxZalloc,
	TxFree,
	Reserve,
	Cancel,
	Persist,     // flush (addr, len) then fence: pmemobj_persist(pop, a, n), pmem_persist(a, n)
	Flush,       // flush (addr, len)
	FlushLine,   // flush one cache line: _mm_clwb(p) and friends
	Fence,       // pmem_drain, _mm_sfence
	WriteMem,    // memcpy-like (dest, src, n) or memset (dest, c, n)
};

struct Spec {
	Kind K;
	unsigned Addr; // index of the address argument of flushes and range logs
};

Spec classify(StringRef N)
{
	return llvm::StringSwitch<Spec>(N)
		.Cases("pmemobj_direct", "pmemobj_direct_inline", {Kind::Direct, 0})
		.Cases("pmem_map_file", "pmem_map", {Kind::MapFile, 0})
		.Case("pmemobj_tx_begin", {Kind::TxBegin, 0})
		.Case("pmemobj_tx_stage", {Kind::TxStage, 0})
		.Case("pmemobj_tx_commit", {Kind::TxCommit, 0})
		.Case("pmemobj_tx_abort", {Kind::TxAbort, 0})
		.Case("pmemobj_tx_process", {Kind::TxProcess, 0})
		.Case("pmemobj_tx_end", {Kind::TxEnd, 0})
		.Cases("pmemobj_tx_add_range", "pmemobj_tx_xadd_range", {Kind::TxAddRange, 0})
		.Cases("pmemobj_tx_add_range_direct", "pmemobj_tx_xadd_range_direct",
		       {Kind::TxAddRangeDirect, 0})
		.Cases("pmemobj_tx_alloc", "pmemobj_tx_xalloc", {Kind::TxAlloc, 0})
		.Case("pmemobj_tx_zalloc", {Kind::TxZalloc, 0})
		.Cases("pmemobj_tx_free", "pmemobj_tx_xfree", {Kind::TxFree, 0})
		.Cases("pmemobj_reserve", "pmemobj_xreserve", {Kind::Reserve, 0})
		.Case("pmemobj_cancel", {Kind::Cancel, 0})
		.Case("pmemobj_persist", {Kind::Persist, 1})
		.Cases("pmem_persist", "pmem_msync", "pmem_deep_persist", {Kind::Persist, 0})
		.Case("pmemobj_flush", {Kind::Flush, 1})
		.Cases("pmem_flush", "pmem_deep_flush", {Kind::Flush, 0})
		.Cases("_mm_clwb", "_mm_clflushopt", "_mm_clflush", {Kind::FlushLine, 0})
		.Cases("__builtin_ia32_clwb", "__builtin_ia32_clflushopt",
		       "__builtin_ia32_clflush", {Kind::FlushLine, 0})
		.Cases("pmem_drain", "pmemobj_drain", "_mm_sfence", "__builtin_ia32_sfence",
		       {Kind::Fence, 0})
		.Cases("memcpy", "memmove", "memset", "__builtin_memcpy", "__builtin_memmove",
		       "__builtin_memset", {Kind::WriteMem, 0})
		.Default({Kind::Other, 0});
}

// Whether a function body calls a libpmemobj transaction function, and which.
struct TxCalls : RecursiveASTVisitor<TxCalls> {
	bool Begins = false, Works = false;
	bool VisitCallExpr(CallExpr *CE)
	{
		if (const FunctionDecl *FD = CE->getDirectCallee()) {
			if (!FD->getIdentifier())
				return true;
			switch (classify(FD->getName()).K) {
			case Kind::TxBegin:
				Begins = true;
				break;
			case Kind::TxAddRange:
			case Kind::TxAddRangeDirect:
			case Kind::TxAlloc:
			case Kind::TxZalloc:
			case Kind::TxFree:
				Works = true;
				break;
			default:
				break;
			}
		}
		return true;
	}
};

class PmemChecker
	: public Checker<check::BeginFunction, check::EndFunction, eval::Call, check::PreCall,
			 check::PostCall, check::PostStmt<CastExpr>, check::Bind,
			 check::Location, check::LiveSymbols> {
	BugType R1{this, "rule 1: PM store not flushed", "PM"};
	BugType R1a{this, "rule 1a: flush of non-PM memory", "PM"};
	BugType R1b{this, "rule 1b: flush smaller than its target", "PM"};
	BugType R2{this, "rule 2: PM store in a transaction not logged", "PM"};
	BugType R3{this, "rule 3: allocation not initialised before commit", "PM"};
	BugType R4{this, "rule 4: use after transactional free", "PM"};

public:
	void checkBeginFunction(CheckerContext &C) const;
	void checkEndFunction(const ReturnStmt *RS, CheckerContext &C) const;
	bool evalCall(const CallEvent &Call, CheckerContext &C) const;
	void checkPreCall(const CallEvent &Call, CheckerContext &C) const;
	void checkPostCall(const CallEvent &Call, CheckerContext &C) const;
	void checkPostStmt(const CastExpr *CE, CheckerContext &C) const;
	void checkLiveSymbols(ProgramStateRef St, SymbolReaper &SR) const;
	void checkBind(SVal L, SVal V, const Stmt *S, CheckerContext &C) const;
	void checkLocation(SVal L, bool IsLoad, const Stmt *S, CheckerContext &C) const;

private:
	// Findings of the current callback: emitted together, on the node of the state it
	// ends in, so that the path goes on from the finding and does not report it again.
	struct Finding {
		const BugType *BT;
		std::string Msg;
		const Stmt *At;
	};
	mutable std::vector<Finding> Found;
	void report(const BugType &BT, std::string Msg, CheckerContext &C,
		    const Stmt *At = nullptr) const;
	void emit(CheckerContext &C, ProgramStateRef St) const;
	ProgramStateRef flushBase(ProgramStateRef St, SVal Addr) const;
	ProgramStateRef fence(ProgramStateRef St, const char *Where, CheckerContext &C) const;
	ProgramStateRef stored(ProgramStateRef St, const MemRegion *R, std::optional<int64_t> Bits,
			       const Stmt *S, CheckerContext &C) const;
	ProgramStateRef commit(ProgramStateRef St, CheckerContext &C) const;
};

unsigned lineOf(const Stmt *S, CheckerContext &C)
{
	return C.getSourceManager().getExpansionLineNumber(S->getBeginLoc());
}

// The symbol of a PM object's start, when R lies in one.
SymbolRef pmBase(ProgramStateRef St, const MemRegion *R)
{
	if (!R)
		return nullptr;
	const auto *SR = dyn_cast<SymbolicRegion>(R->getBaseRegion());
	if (!SR || !St->contains<PmSyms>(SR->getSymbol()))
		return nullptr;
	return SR->getSymbol();
}

// The key of an OID whose `off` is S. An OID a call returned is a conjured struct,
// whose fields are symbols derived from it and from the region read: its identity is
// the conjured struct.
SymbolRef oidKey(SymbolRef S)
{
	if (const auto *D = dyn_cast_or_null<SymbolDerived>(S)) {
		SymbolRef P = D->getParentSymbol();
		if (P->getType()->isRecordType())
			return P;
	}
	return S;
}

// The `off` value of a PMEMoid argument (a struct passed by value).
SymbolRef oidOff(const CallEvent &Call, unsigned I, CheckerContext &C)
{
	const RecordDecl *RD = Call.getArgExpr(I)->getType()->getAsRecordDecl();
	auto LCV = Call.getArgSVal(I).getAs<nonloc::LazyCompoundVal>();
	if (!RD || !LCV)
		return nullptr;
	for (const FieldDecl *FD : RD->fields()) {
		if (FD->getName() != "off")
			continue;
		const FieldRegion *FR = C.getSValBuilder().getRegionManager().getFieldRegion(
			FD, cast<SubRegion>(LCV->getRegion()));
		SVal V = C.getStoreManager().getBinding(LCV->getStore(), loc::MemRegionVal(FR),
							FD->getType());
		return oidKey(V.getAsSymbol());
	}
	return nullptr;
}

bool isZero(ProgramStateRef St, SVal V)
{
	return V.isZeroConstant() || St->isNull(V).isConstrainedTrue();
}

// Whether the OID whose key is Off was read from an object this transaction allocated:
// the transaction wrote it, so it names an object of its own (or one the analyzer lost
// track of, as it does through unions of TOIDs).
bool writtenInTx(ProgramStateRef St, SymbolRef Off)
{
	// An OID a function of this file returned, or read from memory it was given, when
	// the analyzer did not follow the call (its budget or loop bound ran out, and it
	// evaluated the call as unknown): perhaps an allocation of this transaction.
	const auto *D = dyn_cast<SymbolDerived>(Off);
	const auto *CS = dyn_cast<SymbolConjured>(D ? D->getParentSymbol() : Off);
	const auto *CE = CS ? dyn_cast_or_null<CallExpr>(CS->getStmt()) : nullptr;
	const FunctionDecl *FD = CE ? CE->getDirectCallee() : nullptr;
	if (FD && FD->hasBody()) {
		if (!D)
			return true;
		// The call invalidated the whole object it was given a pointer into; only
		// what the pointer named is perhaps its writing.
		for (const MemRegion *G : St->get<GivenToCall>())
			if (D->getRegion() == G || D->getRegion()->isSubRegionOf(G))
				return true;
	}
	const MemRegion *R = nullptr;
	if (const auto *RV = dyn_cast<SymbolRegionValue>(Off))
		R = RV->getRegion();
	else if (D)
		R = D->getRegion();
	SymbolRef B = pmBase(St, R);
	const unsigned *F = B ? St->get<ObjFlags>(B) : nullptr;
	return F && (*F & Fresh);
}

// The PM pointer of an OID argument: the one given for the same `off` before, or a
// new one.
std::pair<ProgramStateRef, SVal> oidPointer(ProgramStateRef St, const CallEvent &Call,
					      unsigned I, CheckerContext &C)
{
	SValBuilder &SVB = C.getSValBuilder();
	SymbolRef Off = oidOff(Call, I, C);
	if (Off) {
		if (const SymbolRef *P = St->get<OidPtr>(Off))
			return {St, SVB.makeLoc(*P)};
	}
	SVal V = SVB.conjureSymbolVal(nullptr, Call.getOriginExpr(), C.getLocationContext(),
					     C.getASTContext().VoidPtrTy, C.blockCount());
	SymbolRef P = V.getAsSymbol();
	St = St->add<PmSyms>(P);
	if (Off) {
		St = St->set<OidPtr>(Off, P);
		St = St->set<ObjFlags>(P, writtenInTx(St, Off) ? Fresh : 0);
	}
	return {St, V};
}

std::optional<int64_t> constInt(SVal V)
{
	if (auto CI = V.getAs<nonloc::ConcreteInt>())
		return CI->getValue().getExtValue();
	return std::nullopt;
}

void PmemChecker::report(const BugType &BT, std::string Msg, CheckerContext &C,
			 const Stmt *At) const
{
	Found.push_back({&BT, std::move(Msg), At});
}

void PmemChecker::emit(CheckerContext &C, ProgramStateRef St) const
{
	if (Found.empty()) {
		C.addTransition(St);
		return;
	}
	ExplodedNode *N = C.generateNonFatalErrorNode(St);
	for (Finding &F : Found) {
		if (!N)
			break;
		auto R = std::make_unique<PathSensitiveBugReport>(*F.BT, F.Msg, N);
		if (F.At)
			R->addRange(F.At->getSourceRange());
		C.emitReport(std::move(R));
	}
	Found.clear();
}

void PmemChecker::checkBeginFunction(CheckerContext &C) const
{
	if (!C.inTopFrame())
		return;
	const Decl *D = C.getLocationContext()->getDecl();
	if (!D || !D->getBody())
		return;
	TxCalls V;
	V.TraverseStmt(D->getBody());
	if (V.Works && !V.Begins) {
		ProgramStateRef St = C.getState();
		St = St->set<TxDepth>(1)->set<TxStage>(Work)->set<ImplicitTx>(true);
		emit(C, St);
	}
}

ProgramStateRef PmemChecker::flushBase(ProgramStateRef St, SVal Addr) const
{
	const MemRegion *R = Addr.getAsRegion();
	if (!R)
		return St;
	const MemRegion *Base = R->getBaseRegion();
	for (auto &E : St->get<Dirty>())
		if (E.first->getBaseRegion() == Base)
			St = St->remove<Dirty>(E.first);
	return St;
}

ProgramStateRef PmemChecker::fence(ProgramStateRef St, const char *Where,
				    CheckerContext &C) const
{
	for (auto &E : St->get<Dirty>()) {
		report(R1,
		       std::string("rule 1: the PM store at line ") +
			       std::to_string(lineOf(E.second, C)) + " is not flushed before " +
			       Where,
		       C, E.second);
		St = St->remove<Dirty>(E.first);
	}
	return St;
}

ProgramStateRef PmemChecker::commit(ProgramStateRef St, CheckerContext &C) const
{
	for (auto &E : St->get<ObjFlags>()) {
		if (!(E.second & Uninit))
			continue;
		const Stmt *const *Site = St->get<AllocSite>(E.first);
		report(R3,
		       "rule 3: the object allocated at line " +
			       (Site ? std::to_string(lineOf(*Site, C)) : std::string("?")) +
			       " is committed without being initialised",
		       C, Site ? *Site : nullptr);
		St = St->set<ObjFlags>(E.first, E.second & ~Uninit);
	}
	return St;
}

// A transaction's end: frees take effect, logs and allocations are forgotten.
ProgramStateRef endTx(ProgramStateRef St)
{
	for (auto &E : St->get<ObjFlags>()) {
		unsigned F = E.second & ~(Fresh | Uninit);
		if (F & PendingFree)
			F = (F & ~PendingFree) | Freed;
		St = St->set<ObjFlags>(E.first, F);
	}
	return St->remove<Logged>();
}

void PmemChecker::checkEndFunction(const ReturnStmt *RS, CheckerContext &C) const
{
	if (!C.inTopFrame())
		return;
	ProgramStateRef St = fence(C.getState(), "the function returns", C);
	emit(C, St);
}

bool PmemChecker::evalCall(const CallEvent &Call, CheckerContext &C) const
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(Call.getDecl());
	const auto *CE = dyn_cast_or_null<CallExpr>(Call.getOriginExpr());
	if (!FD || !CE || !FD->getIdentifier())
		return false;
	Spec K = classify(FD->getName());
	ProgramStateRef St = C.getState();
	SValBuilder &SVB = C.getSValBuilder();
	const LocationContext *LC = C.getLocationContext();
	auto ret = [&](ProgramStateRef S, SVal V) {
		emit(C, S->BindExpr(CE, LC, V));
		return true;
	};
	auto retInt = [&](ProgramStateRef S, uint64_t V) {
		return ret(S, SVB.makeIntVal(V, CE->getType()));
	};
	unsigned Stage = St->get<TxStage>();
	unsigned Depth = St->get<TxDepth>();
	switch (K.K) {
	case Kind::Direct: {
		SymbolRef Off = oidOff(Call, 0, C);
		if (Off && isZero(St, SVB.makeSymbolVal(Off)))
			return ret(St, SVB.makeNullWithType(CE->getType()));
		auto [S, V] = oidPointer(St, Call, 0, C);
		return ret(S, V);
	}
	case Kind::TxBegin:
		return retInt(St->set<TxDepth>(Depth + 1)->set<TxStage>(Work), 0);
	case Kind::TxStage:
		return retInt(St, Stage);
	case Kind::TxCommit:
		if (Stage == Work)
			St = commit(St, C)->set<TxStage>(OnCommit);
		return ret(St, UnknownVal());
	case Kind::TxAbort: {
		for (auto &E : St->get<ObjFlags>())
			St = St->set<ObjFlags>(E.first, E.second & ~PendingFree);
		return ret(St->set<TxStage>(OnAbort), UnknownVal());
	}
	case Kind::TxProcess:
		if (Stage == Work)
			St = commit(St, C)->set<TxStage>(OnCommit);
		else if (Stage == OnCommit || Stage == OnAbort)
			St = St->set<TxStage>(Finally);
		else if (Stage == Finally)
			St = St->set<TxStage>(None);
		return ret(St, UnknownVal());
	case Kind::TxEnd:
		if (Depth <= 1) {
			St = St->set<TxDepth>(0)->set<TxStage>(None);
			if (!St->get<ImplicitTx>())
				St = endTx(St);
		} else {
			St = St->set<TxDepth>(Depth - 1)->set<TxStage>(Work);
		}
		return retInt(St, 0);
	case Kind::TxAddRange: {
		auto [S, P] = oidPointer(St, Call, 0, C);
		std::optional<int64_t> Off = constInt(Call.getArgSVal(1));
		std::optional<int64_t> Len = constInt(Call.getArgSVal(2));
		LogRange LR{P.getAsSymbol(), 0, 0, true};
		if (Off && Len)
			LR = {P.getAsSymbol(), *Off * 8, (*Off + *Len) * 8, false};
		return retInt(S->add<Logged>(LR), 0);
	}
	case Kind::TxAddRangeDirect: {
		const MemRegion *R = Call.getArgSVal(0).getAsRegion();
		SymbolRef B = pmBase(St, R);
		if (B) {
			RegionOffset RO = R->getAsOffset();
			std::optional<int64_t> Len = constInt(Call.getArgSVal(1));
			LogRange LR{B, 0, 0, true};
			if (!RO.hasSymbolicOffset() && Len)
				LR = {B, RO.getOffset(), RO.getOffset() + *Len * 8, false};
			St = St->add<Logged>(LR);
		}
		return retInt(St, 0);
	}
	case Kind::TxFree: {
		SymbolRef Off = oidOff(Call, 0, C);
		const SymbolRef *P = Off ? St->get<OidPtr>(Off) : nullptr;
		if (P) {
			const unsigned *F = St->get<ObjFlags>(*P);
			St = St->set<ObjFlags>(*P, (F ? *F : 0) | PendingFree);
		}
		return retInt(St, 0);
	}
	case Kind::Persist:
	case Kind::Flush:
	case Kind::FlushLine: {
		St = flushBase(St, Call.getArgSVal(K.Addr));
		if (K.K == Kind::Persist)
			St = fence(St, "the fence of this persist", C);
		if (CE->getType()->isVoidType())
			return ret(St, UnknownVal());
		return retInt(St, 0);
	}
	case Kind::Fence:
		return ret(fence(St, "this fence", C), UnknownVal());
	default:
		return false;
	}
}

// Rules 1a and 1b, on a flush's arguments before it runs.
void PmemChecker::checkPreCall(const CallEvent &Call, CheckerContext &C) const
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(Call.getDecl());
	if (!FD || !FD->getIdentifier())
		return;
	Spec K = classify(FD->getName());
	ProgramStateRef St = C.getState();
	if (K.K == Kind::WriteMem && Call.getNumArgs() == 3) {
		const MemRegion *R = Call.getArgSVal(0).getAsRegion();
		if (pmBase(St, R)) {
			std::optional<int64_t> Len = constInt(Call.getArgSVal(2));
			St = stored(St, R, Len ? std::optional<int64_t>(*Len * 8) : std::nullopt,
				    Call.getOriginExpr(), C);
			emit(C, St);
		}
		return;
	}
	if (K.K != Kind::Persist && K.K != Kind::Flush && K.K != Kind::FlushLine)
		return;
	if (Call.getNumArgs() <= K.Addr)
		return;
	SVal Addr = Call.getArgSVal(K.Addr);
	if (const MemRegion *R = Addr.getAsRegion()) {
		const MemSpaceRegion *MS = R->getMemorySpace();
		if (isa<StackSpaceRegion, HeapSpaceRegion>(MS) ||
		    (isa<GlobalsSpaceRegion>(MS) && isa<VarRegion>(R->getBaseRegion()))) {
			report(R1a, "rule 1a: " + FD->getName().str() +
					    " flushes memory that is not PM (" +
					    (isa<StackSpaceRegion>(MS) ? "the stack" :
					     isa<HeapSpaceRegion>(MS) ? "the heap" :
									"a global") +
					    ")",
			       C, Call.getArgExpr(K.Addr));
			emit(C, St);
			return;
		}
	}
	if (K.K == Kind::FlushLine || Call.getNumArgs() <= K.Addr + 1)
		return;
	QualType T = Call.getArgExpr(K.Addr)->IgnoreParenImpCasts()->getType();
	if (!T->isPointerType())
		return;
	QualType P = T->getPointeeType();
	if (P->isVoidType() || P->isIncompleteType() || P->isCharType())
		return;
	std::optional<int64_t> Len = constInt(Call.getArgSVal(K.Addr + 1));
	int64_t Size = C.getASTContext().getTypeSizeInChars(P).getQuantity();
	if (!Len || *Len >= Size)
		return;
	report(R1b,
		       "rule 1b: " + FD->getName().str() + " flushes " + std::to_string(*Len) +
			       " bytes of a " + std::to_string(Size) + "-byte '" +
			       P.getCanonicalType().getUnqualifiedType().getAsString() + "'",
		       C, Call.getArgExpr(K.Addr + 1));
	emit(C, St);
}

// The PMEMoid member of a union (a TOID), if it has one.
const FieldDecl *oidMember(QualType T)
{
	const RecordDecl *U = T->getAsRecordDecl();
	if (!U || !U->isUnion())
		return nullptr;
	for (const FieldDecl *FD : U->fields()) {
		const RecordDecl *RD = FD->getType()->getAsRecordDecl();
		if (RD && RD->getName() == "pmemoid")
			return FD;
	}
	return nullptr;
}

// A TOID a call of this file's returned when the analyzer did not follow it: the
// analyzer gives a union no value, which would lose the OID. Its value here is a union
// whose PMEMoid is conjured for the call, as the analyzer conjures a returned struct, so
// its copies stay one object and writtenInTx sees where it came from.
ProgramStateRef unionReturn(ProgramStateRef St, const CallEvent &Call, CheckerContext &C)
{
	const auto *CE = dyn_cast_or_null<CallExpr>(Call.getOriginExpr());
	const FieldDecl *Oid = oidMember(Call.getResultType());
	if (!CE || !Oid || !Call.getReturnValue().isUnknown())
		return St;
	SValBuilder &SVB = C.getSValBuilder();
	MemRegionManager &MRM = SVB.getRegionManager();
	const LocationContext *LC = C.getLocationContext();
	const auto *Tmp = MRM.getCXXTempObjectRegion(CE, LC);
	SVal V = SVB.conjureSymbolVal(nullptr, CE, LC, Oid->getType(), C.blockCount());
	St = St->bindLoc(loc::MemRegionVal(MRM.getFieldRegion(Oid, Tmp)), V, LC);
	return St->BindExpr(CE, LC, St->getSVal(Tmp, CE->getType()));
}

// Allocations in a transaction: new objects, uninitialised unless zalloc'd.
void PmemChecker::checkPostCall(const CallEvent &Call, CheckerContext &C) const
{
	const auto *FD = dyn_cast_or_null<FunctionDecl>(Call.getDecl());
	Spec K = FD && FD->getIdentifier() ? classify(FD->getName()) : Spec{Kind::Other, 0};
	ProgramStateRef St = C.getState();
	if (K.K == Kind::MapFile) {
		if (SymbolRef S = Call.getReturnValue().getAsSymbol())
			emit(C, St->add<PmSyms>(S));
		return;
	}
	if (K.K == Kind::Cancel) {
		// The reservations are dropped: their memory never becomes an object, so
		// what was stored to it needs no flush.
		for (auto &E : St->get<OidPtr>()) {
			if (!St->contains<Reserved>(E.first))
				continue;
			for (auto &D : St->get<Dirty>())
				if (pmBase(St, D.first) == E.second)
					St = St->remove<Dirty>(D.first);
		}
		emit(C, St->remove<Reserved>());
		return;
	}
	if (K.K == Kind::Reserve) {
		// As for allocations: the OID is the conjured struct the call returns.
		SymbolRef Off = Call.getReturnValue().getAsSymbol();
		if (Off && Off->getType()->isRecordType())
			emit(C, St->add<Reserved>(Off));
		return;
	}
	if (K.K == Kind::Other && !C.wasInlined) {
		// A function the analyzer did not follow may have initialised what it was
		// given (a constructor of pmemobj_tx_alloc's caller, say).
		bool Changed = false;
		if (FD && FD->hasBody()) {
			ProgramStateRef U = unionReturn(St, Call, C);
			for (unsigned I = 0; I < Call.getNumArgs(); I++) {
				const MemRegion *R = Call.getArgSVal(I).getAsRegion();
				if (pmBase(U, R))
					U = U->add<GivenToCall>(R);
			}
			Changed = U != St;
			St = U;
		}
		// One of this file's (too deep, or over the analyzer's budget) may have
		// flushed anything: the stores before it are not judged.
		if (FD && FD->hasBody() && !St->get<Dirty>().isEmpty()) {
			St = St->remove<Dirty>();
			Changed = true;
		}
		for (unsigned I = 0; I < Call.getNumArgs(); I++) {
			SymbolRef B = pmBase(St, Call.getArgSVal(I).getAsRegion());
			const unsigned *F = B ? St->get<ObjFlags>(B) : nullptr;
			if (F && (*F & Uninit)) {
				St = St->set<ObjFlags>(B, *F & ~Uninit);
				Changed = true;
			}
		}
		if (Changed)
			emit(C, St);
		return;
	}
	if (K.K != Kind::TxAlloc && K.K != Kind::TxZalloc)
		return;
	// The analyzer gives a struct an unknown call returns as one conjured symbol.
	SymbolRef Off = Call.getReturnValue().getAsSymbol();
	if (!Off || !Off->getType()->isRecordType())
		return;
	SVal V = C.getSValBuilder().conjureSymbolVal(this, Call.getOriginExpr(),
						     C.getLocationContext(),
						     C.getASTContext().VoidPtrTy, C.blockCount());
	SymbolRef P = V.getAsSymbol();
	St = St->add<PmSyms>(P)->set<OidPtr>(Off, P);
	St = St->set<ObjFlags>(P, Fresh | (K.K == Kind::TxAlloc ? Uninit : 0));
	St = St->set<AllocSite>(P, Call.getOriginExpr());
	emit(C, St);
}

// A store of Bits bits (unknown: nullopt) to PM region R.
ProgramStateRef PmemChecker::stored(ProgramStateRef St, const MemRegion *R,
				     std::optional<int64_t> Bits, const Stmt *S,
				     CheckerContext &C) const
{
	SymbolRef B = pmBase(St, R);
	if (!B)
		return St;
	const unsigned *F = St->get<ObjFlags>(B);
	if (F && (*F & Uninit))
		St = St->set<ObjFlags>(B, *F & ~Uninit);
	if (St->get<TxStage>() != Work) {
		if (St->get<TxDepth>() == 0)
			St = St->set<Dirty>(R, S);
		return St;
	}
	// Rule 2 judges objects whose OID is known, not allocated in this transaction, in a
	// transaction begun on this path: what a caller's transaction logged is unknown.
	if (!F || (*F & Fresh) || St->get<ImplicitTx>())
		return St;
	RegionOffset RO = R->getAsOffset();
	bool Covered = false;
	for (const LogRange &L : St->get<Logged>()) {
		if (L.Base != B)
			continue;
		if (L.Whole || RO.hasSymbolicOffset() || !Bits ||
		    (L.Lo <= RO.getOffset() && RO.getOffset() + *Bits <= L.Hi)) {
			Covered = true;
			break;
		}
	}
	if (!Covered) {
		std::string What;
		if (const auto *FR = dyn_cast<FieldRegion>(R))
			What = " to field '" + FR->getDecl()->getName().str() + "'";
		report(R2,
		       "rule 2: a PM store" + What +
			       " in a transaction to memory not logged (TX_ADD) before",
		       C, S);
	}
	return St;
}

// PM objects stay alive while their OID may be used again: what was stored to them
// must stay readable.
void PmemChecker::checkLiveSymbols(ProgramStateRef St, SymbolReaper &SR) const
{
	for (auto &E : St->get<OidPtr>())
		SR.markLive(E.second);
}

// A cast to a union (GNU C), as TOID's macros make of a PMEMoid (TX_NEW, POBJ_ROOT,
// TOID_NULL): the analyzer gives it no value, which would lose the OID. Its value here is
// a union whose member of the operand's type holds the operand.
void PmemChecker::checkPostStmt(const CastExpr *CE, CheckerContext &C) const
{
	if (CE->getCastKind() != CK_ToUnion)
		return;
	const RecordDecl *U = CE->getType()->getAsRecordDecl();
	const Expr *Sub = CE->getSubExpr();
	if (!U)
		return;
	for (const FieldDecl *FD : U->fields()) {
		if (!C.getASTContext().hasSameUnqualifiedType(FD->getType(), Sub->getType()))
			continue;
		MemRegionManager &MRM = C.getSValBuilder().getRegionManager();
		const LocationContext *LC = C.getLocationContext();
		const auto *Tmp = MRM.getCXXTempObjectRegion(CE, LC);
		ProgramStateRef St = C.getState();
		St = St->bindLoc(loc::MemRegionVal(MRM.getFieldRegion(FD, Tmp)), C.getSVal(Sub), LC);
		emit(C, St->BindExpr(CE, LC, St->getSVal(Tmp, CE->getType())));
		return;
	}
}

void PmemChecker::checkBind(SVal L, SVal V, const Stmt *S, CheckerContext &C) const
{
	const MemRegion *R = L.getAsRegion();
	ProgramStateRef St = C.getState();
	if (!pmBase(St, R))
		return;
	std::optional<int64_t> Bits;
	if (const auto *TR = dyn_cast<TypedValueRegion>(R)) {
		QualType T = TR->getValueType();
		if (!T->isIncompleteType())
			Bits = C.getASTContext().getTypeSize(T);
	}
	emit(C, stored(St, R, Bits, S, C));
}

// Rule 4's path notes: where the object was freed, and where that took effect.
class FreeVisitor : public BugReporterVisitor {
	SymbolRef Obj;

public:
	explicit FreeVisitor(SymbolRef S) : Obj(S) {}
	void Profile(llvm::FoldingSetNodeID &ID) const override
	{
		static int Tag;
		ID.AddPointer(&Tag);
		ID.AddPointer(Obj);
	}
	PathDiagnosticPieceRef VisitNode(const ExplodedNode *N, BugReporterContext &BRC,
					 PathSensitiveBugReport &) override
	{
		const ExplodedNode *Pred = N->getFirstPred();
		if (!Pred)
			return nullptr;
		const unsigned *Now = N->getState()->get<ObjFlags>(Obj);
		const unsigned *Before = Pred->getState()->get<ObjFlags>(Obj);
		unsigned F = Now ? *Now : 0, B = Before ? *Before : 0;
		const char *Note = nullptr;
		if ((F & PendingFree) && !(B & PendingFree))
			Note = "freed here (TX_FREE): it takes effect when the transaction commits";
		else if ((F & Freed) && !(B & Freed))
			Note = "the transaction ends: the object is freed";
		const Stmt *S = N->getStmtForDiagnostics();
		if (!Note || !S)
			return nullptr;
		PathDiagnosticLocation L(S, BRC.getSourceManager(), N->getLocationContext());
		return std::make_shared<PathDiagnosticEventPiece>(L, Note);
	}
};

void PmemChecker::checkLocation(SVal L, bool IsLoad, const Stmt *S, CheckerContext &C) const
{
	ProgramStateRef St = C.getState();
	SymbolRef B = pmBase(St, L.getAsRegion());
	if (!B)
		return;
	const unsigned *F = St->get<ObjFlags>(B);
	if (F && (*F & Freed)) {
		ExplodedNode *N = C.generateErrorNode();
		if (!N)
			return;
		auto R = std::make_unique<PathSensitiveBugReport>(
			R4,
			std::string("rule 4: ") + (IsLoad ? "a load from" : "a store to") +
				" a PM object freed by a committed transaction (TX_FREE)",
			N);
		R->addRange(S->getSourceRange());
		R->addVisitor<FreeVisitor>(B);
		C.emitReport(std::move(R));
	}
}

} // namespace

extern "C" void clang_registerCheckers(CheckerRegistry &Registry)
{
	Registry.addChecker<PmemChecker>("pmem.Conjurer",
					 "Persistent-memory programming rules 1-4 (PmemConjurer)",
					 "docs/design/conjurer.md");
}

extern "C" const char clang_analyzerAPIVersionString[] = CLANG_ANALYZER_API_VERSION_STRING;
