package main

import "C"

import (
	"os"

	"hpusim/device"
)

// hpusim_claim_module records that this process uses emulated module `module`, so hl-smi
// lists it among the card's compute processes. The module id comes from Python (the
// bridge's HLS_MODULE_ID logic runs after this library loaded, so Go's copy of the
// environment would not have it).
//
//export hpusim_claim_module
func hpusim_claim_module(module C.int) (rc C.int) {
	defer guard(&rc)
	if err := device.ClaimModule(device.StatusDir(os.Getenv), int(module)); err != nil {
		return setErr(err)
	}
	return statusOK
}

// hpusim_release_modules removes this process's claims (at exit).
//
//export hpusim_release_modules
func hpusim_release_modules() (rc C.int) {
	defer guard(&rc)
	device.ReleaseModules(device.StatusDir(os.Getenv))
	return statusOK
}
