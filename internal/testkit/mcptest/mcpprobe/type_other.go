//go:build !unix

package main

import "errors"

// typeIntoTerminal has no terminal to type into here.
func typeIntoTerminal(string) error { return errors.ErrUnsupported }
