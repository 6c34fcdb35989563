#include "spec/suffix_trie.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace ember::spec {

SuffixTrie::SuffixTrie(int32_t max_depth) : max_depth_(max_depth) {
  EMBER_CHECK(max_depth >= 1, "suffix trie depth {}", max_depth);
  runs_.emplace_back();  // the root: the empty pattern, counting every start position
}

size_t SuffixTrie::Index(SeqId seq) const {
  EMBER_CHECK(seq >= first_seq_ && seq - first_seq_ < static_cast<int64_t>(seqs_.size()), "no sequence {}", seq);
  const size_t i = static_cast<size_t>(seq - first_seq_);
  EMBER_CHECK(seqs_[i].live, "sequence {} was removed", seq);
  return i;
}

SuffixTrie::Sequence& SuffixTrie::Seq(SeqId seq) { return seqs_[Index(seq)]; }
const SuffixTrie::Sequence& SuffixTrie::Seq(SeqId seq) const { return seqs_[Index(seq)]; }

int32_t SuffixTrie::TokenAt(const Run& run, int32_t index) const {
  const Sequence& ref = seqs_[static_cast<size_t>(run.ref_seq - first_seq_)];
  return ref.tokens[static_cast<size_t>(run.ref_end - run.length + index)];
}

std::span<const int32_t> SuffixTrie::tokens(SeqId seq) const { return Seq(seq).tokens; }

size_t SuffixTrie::num_sequences() const {
  return static_cast<size_t>(std::count_if(seqs_.begin(), seqs_.end(), [](const Sequence& s) { return s.live; }));
}

SuffixTrie::SeqId SuffixTrie::Open() {
  EMBER_CHECK(first_seq_ + static_cast<int64_t>(seqs_.size()) < std::numeric_limits<SeqId>::max());
  Sequence& s = seqs_.emplace_back();
  s.live = true;
  s.open.assign(static_cast<size_t>(max_depth_), kNoRun);
  return first_seq_ + static_cast<SeqId>(seqs_.size() - 1);
}

void SuffixTrie::Close(SeqId seq) { std::vector<RunId>().swap(Seq(seq).open); }

SuffixTrie::SeqId SuffixTrie::Insert(std::span<const int32_t> sequence) {
  const SeqId seq = Open();
  Seq(seq).tokens.reserve(sequence.size());
  for (int32_t token : sequence) Append(seq, token);
  Close(seq);
  return seq;
}

void SuffixTrie::Append(SeqId seq, int32_t token) {
  Sequence& s = Seq(seq);
  EMBER_CHECK(!s.open.empty(), "appending to closed sequence {}", seq);
  EMBER_CHECK(s.tokens.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const int32_t pos = static_cast<int32_t>(s.tokens.size());
  s.tokens.push_back(token);
  ++runs_[kRootRun].count;  // a new start position
  const size_t depth = static_cast<size_t>(max_depth_);
  s.open[static_cast<size_t>(pos) % depth] = kRootRun;
  // The suffixes starting at first..pos are shorter than max_depth; the one at `first` reaches it
  // now, and its slot goes to the suffix starting at pos + 1.
  const int32_t first = std::max(0, pos - max_depth_ + 1);
  for (int32_t p = first; p <= pos; ++p) {
    RunId& at = s.open[static_cast<size_t>(p) % depth];
    at = Extend(at, token, seq, pos + 1);
  }
}

SuffixTrie::RunId SuffixTrie::Extend(RunId at, int32_t token, SeqId seq, int32_t end) {
  if (at != kRootRun && runs_[at].count == 1) {
    // Only this path reaches `at`, so nothing is below it: the run grows by the token.
    Run& r = runs_[at];
    ++r.length;
    r.ref_seq = seq;
    r.ref_end = end;
    ++num_nodes_;
    return at;
  }
  const RunId child = edges_.Find(at, token);
  if (child == TrieEdgeTable::kAbsent) return NewLeaf(at, token, seq, end);
  if (at != kRootRun && runs_[at].count == runs_[child].count + 1) {
    // Every other path through `at` goes on into `child`: `at` ended there only because this path
    // did, so the boundary moves one token down. `at`'s reference continues into `child` too (its
    // path is this one or one of those), hence ref_end + 1.
    if (runs_[child].length == 1) {
      Fuse(at, child);
      Touch(child, seq, end);
      return child;
    }
    Run& a = runs_[at];
    Run& c = runs_[child];
    ++a.length;
    ++a.ref_end;
    --c.length;
    edges_.Erase(at, c.token);
    c.token = TokenAt(c, 0);
    edges_.Insert(at, c.token, child);
    Touch(at, seq, end);
    return at;
  }
  // Others end at `at` or branch off: this path joins `child`'s first token.
  const RunId top = runs_[child].length == 1 ? child : SplitTop(child, 1);
  ++runs_[top].count;
  Touch(top, seq, end);
  return top;
}

void SuffixTrie::Touch(RunId run, SeqId seq, int32_t end) {
  Run& r = runs_[run];
  if (seq >= r.ref_seq) {
    r.ref_seq = seq;
    r.ref_end = end;
  }
}

SuffixTrie::RunId SuffixTrie::NewRun() {
  if (!free_.empty()) {
    const RunId run = free_.back();
    free_.pop_back();
    return run;
  }
  EMBER_CHECK(runs_.size() < static_cast<size_t>(std::numeric_limits<RunId>::max()));
  runs_.emplace_back();
  return static_cast<RunId>(runs_.size() - 1);
}

SuffixTrie::RunId SuffixTrie::NewLeaf(RunId parent, int32_t token, SeqId seq, int32_t end) {
  const RunId leaf = NewRun();
  Run& l = runs_[leaf];
  l = Run{.token = token, .count = 1, .length = 1, .ref_seq = seq, .ref_end = end, .parent = parent};
  l.next_sibling = runs_[parent].first_child;
  if (l.next_sibling != kNoRun) runs_[l.next_sibling].prev_sibling = leaf;
  runs_[parent].first_child = leaf;
  edges_.Insert(parent, token, leaf);
  ++num_nodes_;
  return leaf;
}

void SuffixTrie::ReplaceChild(RunId run, RunId replacement) {
  const Run& r = runs_[run];
  Run& n = runs_[replacement];
  n.parent = r.parent;
  n.prev_sibling = r.prev_sibling;
  n.next_sibling = r.next_sibling;
  if (n.prev_sibling != kNoRun) {
    runs_[n.prev_sibling].next_sibling = replacement;
  } else {
    runs_[n.parent].first_child = replacement;
  }
  if (n.next_sibling != kNoRun) runs_[n.next_sibling].prev_sibling = replacement;
  edges_.Set(r.parent, r.token, replacement);
}

SuffixTrie::RunId SuffixTrie::SplitTop(RunId run, int32_t length) {
  const RunId top = NewRun();  // before the references below: it may grow runs_
  Run& r = runs_[run];
  Run& t = runs_[top];
  t = Run{.token = r.token,
          .count = r.count,
          .length = length,
          .ref_seq = r.ref_seq,
          .ref_end = r.ref_end - (r.length - length),
          .first_child = run};
  ReplaceChild(run, top);
  r.length -= length;
  r.token = TokenAt(r, 0);
  r.parent = top;
  r.prev_sibling = r.next_sibling = kNoRun;
  edges_.Insert(top, r.token, run);
  return top;
}

void SuffixTrie::Fuse(RunId run, RunId child) {
  Run& r = runs_[run];
  Run& c = runs_[child];
  edges_.Erase(run, c.token);
  ReplaceChild(run, child);
  // The child's reference is a whole path through the child, so through `run` as well.
  c.token = r.token;
  c.length += r.length;
  c.count = r.count;
  r = Run{};
  free_.push_back(run);
}

void SuffixTrie::FuseWithOnlyChildIfEqual(RunId run) {
  if (run == kRootRun) return;
  const RunId child = runs_[run].first_child;
  if (child != kNoRun && runs_[child].next_sibling == kNoRun && runs_[child].count == runs_[run].count) {
    Fuse(run, child);
  }
}

void SuffixTrie::Release(RunId run) {
  Run& r = runs_[run];
  if (r.prev_sibling != kNoRun) {
    runs_[r.prev_sibling].next_sibling = r.next_sibling;
  } else {
    runs_[r.parent].first_child = r.next_sibling;
  }
  if (r.next_sibling != kNoRun) runs_[r.next_sibling].prev_sibling = r.prev_sibling;
  pending_.assign(1, run);
  while (!pending_.empty()) {
    const RunId id = pending_.back();
    pending_.pop_back();
    for (RunId c = runs_[id].first_child; c != kNoRun; c = runs_[c].next_sibling) pending_.push_back(c);
    edges_.Erase(runs_[id].parent, runs_[id].token);
    num_nodes_ -= static_cast<size_t>(runs_[id].length);
    runs_[id] = Run{};
    free_.push_back(id);
  }
}

void SuffixTrie::Remove(std::span<const int32_t> sequence) {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    const Sequence& s = seqs_[i];
    if (s.live && std::equal(s.tokens.begin(), s.tokens.end(), sequence.begin(), sequence.end())) {
      Remove(first_seq_ + static_cast<SeqId>(i));
      return;
    }
  }
  EMBER_CHECK(false, "removing a sequence that was not inserted");
}

void SuffixTrie::Remove(SeqId seq) {
  Seq(seq);  // checks that it is held
  if (seq == first_seq_) {
    RemoveOldest();
  } else {
    RebuildWithout(seq);
  }
  while (!seqs_.empty() && !seqs_.front().live) {
    seqs_.pop_front();
    ++first_seq_;
  }
}

// A run refers to the newest sequence through it (Touch). So a run that refers to the oldest
// sequence has no other sequence through it, and dies with it: no reference is left dangling.
// Removing a newer sequence could leave runs that refer to it while older ones still go through
// them, and finding one of those would need a record per path end; the engine's cache only ever
// evicts the oldest, so other removals rebuild instead.
void SuffixTrie::RemoveOldest() {
  Sequence& s = seqs_.front();
  const int32_t len = static_cast<int32_t>(s.tokens.size());
  for (int32_t start = 0; start < len; ++start) {
    EMBER_CHECK(runs_[kRootRun].count > 0, "removing a sequence that was not inserted");
    --runs_[kRootRun].count;
    const int32_t stop = std::min(len, start + max_depth_);
    RunId at = kRootRun;
    for (int32_t i = start; i < stop;) {
      const RunId child = edges_.Find(at, s.tokens[static_cast<size_t>(i)]);
      EMBER_CHECK(child != TrieEdgeTable::kAbsent, "removing a sequence that was not inserted");
      // A run that this path alone held has only this path below it.
      if (--runs_[child].count == 0) {
        Release(child);
        break;
      }
      i += runs_[child].length;
      EMBER_CHECK(i <= stop, "a path ends inside a run");
      at = child;
    }
    // Only the last run left on the path changed shape: its path end or its child on the path is
    // gone, which may leave it one child with its own count.
    FuseWithOnlyChildIfEqual(at);
  }
  s = Sequence{};
}

// Appends the other sequences again in order, under their ids, so that each run refers to the
// newest sequence through it again; open ones stay open.
void SuffixTrie::RebuildWithout(SeqId removed) {
  std::deque<Sequence> old;
  old.swap(seqs_);
  runs_.assign(1, Run{});
  free_.clear();
  edges_ = TrieEdgeTable();
  num_nodes_ = 1;
  seqs_.resize(old.size());
  for (size_t i = 0; i < old.size(); ++i) {
    const SeqId id = first_seq_ + static_cast<SeqId>(i);
    if (!old[i].live || id == removed) continue;
    Sequence& s = seqs_[i];
    s.live = true;
    s.open.assign(static_cast<size_t>(max_depth_), kNoRun);
    s.tokens.reserve(old[i].tokens.size());
    for (int32_t token : old[i].tokens) Append(id, token);
    if (old[i].open.empty()) Close(id);
  }
}

SuffixTrie::NodeId SuffixTrie::Find(std::span<const int32_t> pattern) const {
  if (static_cast<int64_t>(pattern.size()) > max_depth_) return kNone;
  NodeId node = kRoot;
  for (int32_t token : pattern) {
    const Run& r = runs_[node.run];
    if (node.offset < r.length) {
      if (TokenAt(r, node.offset) != token) return kNone;
      ++node.offset;
    } else {
      const RunId child = edges_.Find(node.run, token);
      if (child == TrieEdgeTable::kAbsent) return kNone;
      node = {child, 1};
    }
  }
  return node;
}

SuffixTrie::NodeId SuffixTrie::MostFrequentChild(NodeId node) const {
  // Inside a run the one child has the same count.
  if (node.offset < runs_[node.run].length) return {node.run, node.offset + 1};
  RunId best = kNoRun;
  for (RunId c = runs_[node.run].first_child; c != kNoRun; c = runs_[c].next_sibling) {
    const Run& r = runs_[c];
    if (best == kNoRun) {
      best = c;
      continue;
    }
    const Run& b = runs_[best];
    if (r.count > b.count || (r.count == b.count && r.token < b.token)) best = c;
  }
  return best == kNoRun ? kNone : NodeId{best, 1};
}

int32_t SuffixTrie::token(NodeId node) const {
  if (node.offset == 0) return -1;
  const Run& r = runs_[node.run];
  return node.offset == 1 ? r.token : TokenAt(r, node.offset - 1);
}

size_t SuffixTrie::bytes() const {
  size_t total = runs_.capacity() * sizeof(Run) + free_.capacity() * sizeof(RunId) + edges_.bytes() +
                 pending_.capacity() * sizeof(RunId) + seqs_.size() * sizeof(Sequence);
  for (const Sequence& s : seqs_) total += s.tokens.capacity() * sizeof(int32_t) + s.open.capacity() * sizeof(RunId);
  return total;
}

}  // namespace ember::spec
