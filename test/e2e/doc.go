// Package e2e holds the multi-process tests: real meshgw and fakeworker processes on loopback,
// driven the way an operator or a client would drive them.
package e2e
