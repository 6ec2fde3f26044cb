//! The latch: OPTIMISTIC or PESSIMISTIC, and the table of docs/behaviour.md that
//! moves it. Only verdicts on the newest render reach [`Latch::apply`].

/// Why the latch is pessimistic (or pinned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// HAProxy refused the newest render.
    Refused,
    /// The newest render could not be judged.
    Unavailable,
    /// A leadership term began held (`--start-held`): nothing has passed in
    /// it yet. Only a latch state, never a pinned reason.
    TermStart,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Refused => "refused",
            Reason::Unavailable => "unavailable",
            Reason::TermStart => "term-start",
        }
    }
}

/// The latch's state, as published in `latch` outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LatchState {
    /// Renders dispatch at once.
    #[default]
    Optimistic,
    /// Every render is held until the gate passes one.
    Pessimistic(Reason),
}

/// How a newest verdict came out, as far as the latch cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewestVerdict {
    Pass,
    Fail(Reason),
}

/// The latch and whether it is pinned (two newest failures in a row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latch {
    state: LatchState,
    pinned: Option<Reason>,
}

/// What [`Latch::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// `pinned` for the verdict that caused it.
    pub pinned: Option<Reason>,
    /// The new state, if the state (or its reason) changed.
    pub changed: Option<LatchState>,
    /// A pass while pessimistic: the held render may go out.
    pub release: bool,
}

impl Latch {
    pub fn state(&self) -> LatchState {
        self.state
    }

    /// Pinned: the latch failed twice in a row on newest renders. The reason
    /// is `Refused` only if HAProxy refused both, so a gate that merely could
    /// not run never claims two refusals.
    pub fn pinned(&self) -> Option<Reason> {
        self.pinned
    }

    /// The latch of a term that starts held: pessimistic until a pass.
    pub fn held() -> Latch {
        Latch { state: LatchState::Pessimistic(Reason::TermStart), pinned: None }
    }

    pub fn is_pessimistic(&self) -> bool {
        matches!(self.state, LatchState::Pessimistic(_))
    }

    /// Applies one verdict on the newest render (docs/behaviour.md, "The latch").
    pub fn apply(&mut self, verdict: NewestVerdict) -> Transition {
        let before = self.state;
        let (state, pinned) = match (before, verdict) {
            (_, NewestVerdict::Pass) => (LatchState::Optimistic, None),
            // A held term's first failure is its first, not its second: not pinned.
            (
                LatchState::Optimistic | LatchState::Pessimistic(Reason::TermStart),
                NewestVerdict::Fail(reason),
            ) => (LatchState::Pessimistic(reason), None),
            (LatchState::Pessimistic(previous), NewestVerdict::Fail(reason)) => {
                let both_refused = previous == Reason::Refused && reason == Reason::Refused;
                let pinned = if both_refused { Reason::Refused } else { Reason::Unavailable };
                (LatchState::Pessimistic(reason), Some(pinned))
            }
        };
        self.state = state;
        self.pinned = pinned;
        Transition {
            pinned,
            changed: (state != before).then_some(state),
            release: verdict == NewestVerdict::Pass && before != LatchState::Optimistic,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NewestVerdict::*;
    use Reason::*;

    /// docs/behaviour.md's table, row by row: (P before, verdict) → (P after, pinned).
    #[test]
    fn table_of_behaviour_md() {
        let rows = [
            (false, Pass, false, false),
            (false, Fail(Refused), true, false),
            (false, Fail(Unavailable), true, false),
            (true, Pass, false, false),
            (true, Fail(Refused), true, true),
            (true, Fail(Unavailable), true, true),
        ];
        for (before, verdict, after, pinned) in rows {
            let mut latch = Latch::default();
            if before {
                latch.apply(Fail(Refused));
            }
            let t = latch.apply(verdict);
            assert_eq!(latch.is_pessimistic(), after, "{before} {verdict:?}");
            assert_eq!(t.pinned.is_some(), pinned, "{before} {verdict:?}");
            assert_eq!(t.release, before && verdict == Pass, "{before} {verdict:?}");
        }
    }

    /// A term held from its start: a pass releases; a first failure keeps it
    /// pessimistic for that failure, unpinned; a second pins.
    #[test]
    fn a_held_term_waits_for_a_pass_and_its_first_failure_is_not_pinned() {
        let mut held = Latch::held();
        assert_eq!(held.state(), LatchState::Pessimistic(TermStart));
        let t = held.apply(Pass);
        assert_eq!((t.changed, t.release, t.pinned), (Some(LatchState::Optimistic), true, None));
        for reason in [Refused, Unavailable] {
            let mut held = Latch::held();
            let t = held.apply(Fail(reason));
            assert_eq!(
                (t.changed, t.release, t.pinned),
                (Some(LatchState::Pessimistic(reason)), false, None)
            );
            assert!(held.apply(Fail(reason)).pinned.is_some(), "the second failure pins");
        }
    }

    #[test]
    fn pinned_says_refused_only_for_two_refusals() {
        let mut latch = Latch::default();
        latch.apply(Fail(Unavailable));
        assert_eq!(latch.apply(Fail(Refused)).pinned, Some(Unavailable));
        assert_eq!(latch.apply(Fail(Refused)).pinned, Some(Refused));
        assert_eq!(latch.apply(Fail(Unavailable)).pinned, Some(Unavailable));
        assert_eq!(latch.state(), LatchState::Pessimistic(Unavailable));
    }

    #[test]
    fn change_is_reported_for_state_and_reason_only() {
        let mut latch = Latch::default();
        assert_eq!(latch.apply(Pass).changed, None);
        assert_eq!(latch.apply(Fail(Refused)).changed, Some(LatchState::Pessimistic(Refused)));
        assert_eq!(latch.apply(Fail(Refused)).changed, None);
        assert_eq!(
            latch.apply(Fail(Unavailable)).changed,
            Some(LatchState::Pessimistic(Unavailable))
        );
        assert_eq!(latch.apply(Pass).changed, Some(LatchState::Optimistic));
    }
}
