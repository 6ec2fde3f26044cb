//! Verdict memory: HAProxy's answers per content, so the same content is
//! never judged twice. LRU; a hit refreshes; only judgements are stored.

use super::CheckOutcome;
use crate::render::Checksum;
use std::collections::VecDeque;

/// What an answer is remembered by: the plan, the content, and who judged it
/// (the haproxy binary's path and hash), so a new binary never reuses an
/// old answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemoryKey {
    pub plan: String,
    pub checksum: Checksum,
    pub judge: String,
}

#[derive(Debug)]
pub struct VerdictMemory {
    capacity: usize,
    /// Most recently used at the back.
    entries: VecDeque<(MemoryKey, CheckOutcome)>,
}

impl VerdictMemory {
    pub fn new(capacity: usize) -> Self {
        VerdictMemory { capacity, entries: VecDeque::with_capacity(capacity) }
    }

    /// Looks an answer up, refreshing it.
    pub fn get(&mut self, key: &MemoryKey) -> Option<CheckOutcome> {
        self.find(&key.plan, &key.checksum, &key.judge)
    }

    /// As [`VerdictMemory::get`], by the key's parts: the gate asks on every
    /// step while a render waits, and need not build a key to ask.
    pub fn find(&mut self, plan: &str, checksum: &Checksum, judge: &str) -> Option<CheckOutcome> {
        let at = self
            .entries
            .iter()
            .position(|(k, _)| k.plan == plan && k.checksum == *checksum && k.judge == judge)?;
        let entry = self.entries.remove(at)?;
        let outcome = entry.1.clone();
        self.entries.push_back(entry);
        Some(outcome)
    }

    /// Remembers HAProxy's answer; "could not run" is never remembered.
    pub fn insert(&mut self, key: MemoryKey, outcome: &CheckOutcome) {
        if !outcome.is_judgement() || self.capacity == 0 {
            return;
        }
        self.entries.retain(|(k, _)| *k != key);
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back((key, outcome.clone()));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Render;

    fn key(plan: &str, config: &str, judge: &str) -> MemoryKey {
        let r = Render::new(plan, "r", config, vec![]);
        MemoryKey { plan: plan.into(), checksum: r.checksum().clone(), judge: judge.into() }
    }
    fn pass() -> CheckOutcome {
        CheckOutcome::Passed { message: String::new() }
    }

    #[test]
    fn lru_of_sixteen_where_a_hit_refreshes() {
        let mut m = VerdictMemory::new(16);
        for i in 0..16 {
            m.insert(key(&format!("p{i}"), "c", "h"), &pass());
        }
        assert!(m.get(&key("p0", "c", "h")).is_some()); // p0 is now the freshest
        m.insert(key("p16", "c", "h"), &pass()); // evicts p1, the least recent
        assert_eq!(m.len(), 16);
        assert!(m.get(&key("p0", "c", "h")).is_some());
        assert!(m.get(&key("p1", "c", "h")).is_none());
        assert!(m.get(&key("p2", "c", "h")).is_some());
    }

    #[test]
    fn keyed_by_plan_content_and_judge_and_never_remembers_unavailable() {
        let mut m = VerdictMemory::new(16);
        m.insert(key("p", "c", "haproxy-a"), &pass());
        assert!(m.get(&key("p", "c", "haproxy-b")).is_none());
        assert!(m.get(&key("q", "c", "haproxy-a")).is_none());
        assert!(m.get(&key("p", "d", "haproxy-a")).is_none());
        assert_eq!(m.get(&key("p", "c", "haproxy-a")), Some(pass()));
        m.insert(key("u", "c", "haproxy-a"), &CheckOutcome::Unavailable { reason: "x".into() });
        assert!(m.get(&key("u", "c", "haproxy-a")).is_none());
    }
}
