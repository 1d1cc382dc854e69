// Package archtest holds tests of the module's shape rather than of its
// behaviour: TestPackageMap checks every import between the module's
// packages against the design map in imports.txt, so that a layer reaching
// up (the state store importing the server, say) fails the build's tests
// instead of surfacing later as an import cycle or a bloated binary.
//
// The package has no code of its own outside its tests.
package archtest
