// Each render's Causation, for every verdict the gate may still give on it
// (a could-not-run, the retry's verdict, a restarted gate's verdict again):
// kept while the gate may judge the render, which is while it is among the
// last renders sent, awaits its first verdict, or a pod holds it (its
// report names it, or it is the latest render of a plan a report without
// a render id names). The gate keeps no more (docs/behaviour.md, "Which
// renders get checked"), nor does the client re-send more after a restart.

package haptic

import "time"

// causesKept is how many of the last renders sent keep their causation
// besides those that await a verdict or that a pod holds: more than the
// gate keeps of the renders no pod holds (the newest and four superseded).
const causesKept = 64

type causes struct {
	of    map[string]string // render id → its TemplateRendered's Causation
	plan  map[string]string // render id → its plan
	order []string          // render ids, in the order they were last sent, each once
	pods  map[string]holding
	// passedOrRefused are the renders the gate judged (pass or refused)
	passedOrRefused map[string]bool
}

// holding is what a pod's last report names, and since when it has.
type holding struct {
	render, plan string
	since        time.Time
}

func newCauses() causes {
	return causes{of: map[string]string{}, plan: map[string]string{}, pods: map[string]holding{},
		passedOrRefused: map[string]bool{}}
}

// sent records a render sent to the gate with its causation ("" for none);
// awaiting are the renders still waiting for their first verdict.
func (cs *causes) sent(render, plan, causation string, awaiting func(string) bool) {
	if _, known := cs.plan[render]; known {
		for i, id := range cs.order {
			if id == render {
				cs.order = append(cs.order[:i], cs.order[i+1:]...)
				break
			}
		}
	}
	cs.order = append(cs.order, render)
	cs.plan[render] = plan
	cs.of[render] = causation
	if len(cs.order) > 2*causesKept { // pruned in batches: linear time over the renders sent
		cs.prune(awaiting)
	}
}

// prune forgets the causation of every render the gate can no longer judge.
func (cs *causes) prune(awaiting func(string) bool) {
	ids, plans := map[string]bool{}, map[string]bool{}
	for _, h := range cs.pods {
		if h.render != "" {
			ids[h.render] = true
		} else {
			plans[h.plan] = true
		}
	}
	seenPlan := map[string]bool{}
	var kept []string
	for i := len(cs.order) - 1; i >= 0; i-- { // newest first
		id := cs.order[i]
		plan := cs.plan[id]
		latest := !seenPlan[plan]
		seenPlan[plan] = true
		if len(cs.order)-i <= causesKept || ids[id] || (plans[plan] && latest) || awaiting(id) {
			kept = append(kept, id)
			continue
		}
		delete(cs.of, id)
		delete(cs.plan, id)
		delete(cs.passedOrRefused, id)
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	cs.order = kept
}

// judged records that the gate passed or refused render.
func (cs *causes) judged(render string) { cs.passedOrRefused[render] = true }

// judgedRenders are the renders the gate passed or refused, as a set of its own.
func (cs *causes) judgedRenders() map[string]bool {
	judged := make(map[string]bool, len(cs.passedOrRefused))
	for render := range cs.passedOrRefused {
		judged[render] = true
	}
	return judged
}

// told follows what the gate is told of the pods: a pod that reports
// again what it reported before holds it since its first report.
func (cs *causes) told(pod string, h holding, now time.Time) {
	h.since = now
	if old, ok := cs.pods[pod]; ok && old.render == h.render && old.plan == h.plan {
		h.since = old.since
	}
	cs.pods[pod] = h
}

// held is every render some pod holds (by id, or as the latest render
// sent of a plan a report without a render id names), with since when the
// first pod has: the gate checks a superseded render only while one does.
// One pass over the pods and one over the renders sent.
func (cs *causes) held() map[string]time.Time {
	latest := map[string]string{} // plan → its render sent last
	for _, id := range cs.order {
		latest[cs.plan[id]] = id
	}
	held := map[string]time.Time{}
	for _, h := range cs.pods {
		render := h.render
		if render == "" {
			if render = latest[h.plan]; render == "" {
				continue
			}
		}
		if since, ok := held[render]; !ok || h.since.Before(since) {
			held[render] = h.since
		}
	}
	return held
}

func (cs *causes) terminated(pod string) { delete(cs.pods, pod) }

func (cs *causes) discovered(pods []string) {
	listed := map[string]bool{}
	for _, p := range pods {
		listed[p] = true
	}
	for p := range cs.pods {
		if !listed[p] {
			delete(cs.pods, p)
		}
	}
}

// newTerm: the gate forgets the pods (their causations stay while recent).
func (cs *causes) newTerm() { cs.pods = map[string]holding{} }
