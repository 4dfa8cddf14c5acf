package sharedlog

import "context"

// SealVirtual seals the whole log, for tests that treat a VirtualLog as a
// Loglet.
func SealVirtual(ctx context.Context, v *VirtualLog) error { return v.seal(ctx) }

// SetBeforeSealHook makes v's reconfigurations call fn after the new
// loglet is checked and before the active one is sealed.
func SetBeforeSealHook(v *VirtualLog, fn func()) { v.testHooks.beforeSeal = fn }
