// The fleet test's pods, renders and load, exported to the package's
// external tests (fleet_haptic_test.go drives the same fleet through the
// haptic adapter, which imports this package and so cannot be imported by
// its internal tests).

package rendergate

import "testing"

// FleetPod is one HAProxy of the fleet and its agent.
type FleetPod = pod

// FleetLoad is the load loop through every pod.
type FleetLoad = load

func Binary(t testing.TB) string                  { return binary(t) }
func FleetHAProxy(t testing.TB) string            { return fleetHAProxy(t) }
func FleetBackends(t testing.TB, def int) int     { return fleetBackends(t, def) }
func StartBackend(t testing.TB) string            { return startBackend(t) }
func RenderFiles(r Rendered) map[string][]byte    { return renderFiles(r) }
func SameTree(got, want map[string][]byte) string { return sameTree(got, want) }

func FleetRender(plan, render string, backends int, server string, bad bool) Rendered {
	return fleetRender(plan, render, backends, server, bad)
}

func StartFleetPod(t testing.TB, haproxy, dir, name string, r Rendered) *FleetPod {
	return startPod(t, haproxy, dir, name, r)
}

func StartLoad(t testing.TB, pods []*FleetPod, backends int) *FleetLoad {
	return startLoad(t, pods, backends)
}

func (p *pod) Name() string                                  { return p.name }
func (p *pod) Apply(r Rendered) (Applied, bool, error)       { return p.apply(r) }
func (p *pod) Promote(plan string) (Applied, bool, error)    { return p.promote(plan) }
func (p *pod) Revert(plan, to string) (Applied, bool, error) { return p.revert(plan, to) }
func (p *pod) Report() Applied                               { return p.report() }
func (p *pod) LiveFiles() (map[string][]byte, error)         { return p.liveFiles() }
func (p *pod) FailedReloads() int                            { return p.failedReloads }

func (l *load) Halt()                      { l.halt() }
func (l *load) Count(pod, plan string) int { return l.count(pod, plan) }
func (l *load) Summary() (total int, failures []string, plans map[string]int) {
	return l.summary()
}
