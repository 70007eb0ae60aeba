package proctest

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// KillSchedule is the seeded random schedule of a test's kill loop: how many
// times it kills a runner (8 to 15) and the rng that picks when. The
// environment's MANIFOLD_KILL_SEED replays a schedule the test logged;
// MANIFOLD_KILL_ROUNDS asks for that many kills, a longer loop than the default.
func KillSchedule(t testing.TB) (int, *rand.Rand) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MANIFOLD_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MANIFOLD_KILL_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	rounds := 8 + rng.IntN(8)
	if s := os.Getenv("MANIFOLD_KILL_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("MANIFOLD_KILL_ROUNDS=%q: give a number of kills, 1 or more", s)
		}
		rounds = v
	}
	t.Logf("kill loop: %d kills, seed %d (MANIFOLD_KILL_SEED=%d replays it)", rounds, seed, seed)
	return rounds, rng
}
