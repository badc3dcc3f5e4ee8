package schema

import (
	"context"
	"testing"
	"time"
)

// TestARestDebtRestsOnceItComesToMinRest checks restDebt.pay: what is owed below minRest is
// kept for later, without a timer; once it comes to minRest the whole debt is rested, at least
// as long (a timer never fires early), and what was slept past it is paid ahead, up to minRest;
// a rest that ctx ends says so.
func TestARestDebtRestsOnceItComesToMinRest(t *testing.T) {
	var o restDebt
	began := time.Now()
	for range 3 {
		if !o.pay(t.Context(), minRest/4) {
			t.Fatal("a debt under minRest ended")
		}
	}
	if o != restDebt(3*minRest/4) {
		t.Errorf("owed %v after three quarters of minRest; want %v", time.Duration(o), 3*minRest/4)
	}
	o.pay(t.Context(), minRest/2) // comes to 5/4 of minRest: rested
	if took := time.Since(began); took < 5*minRest/4 {
		t.Errorf("rested %v for a debt of %v", took, 5*minRest/4)
	}
	if o > 0 || o < -restDebt(minRest) {
		t.Errorf("owed %v after its rest; want it paid, or paid ahead by minRest at most", time.Duration(o))
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if o = 0; o.pay(ctx, 2*minRest) {
		t.Error("a rest whose context had ended said it rested")
	}
}
