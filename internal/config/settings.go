package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Settings are drover's own settings, in config.json in Dir: what every
// drover command of this user takes without flags.
type Settings struct {
	// Notify are notification targets (CON-3), as --notify takes them:
	// http(s) URLs to post to, or "desktop". They are added to those of
	// --notify. Webhook URLs carry tokens: the file is kept private.
	Notify []string `json:"notify,omitempty"`
}

// SettingsFile returns the path of the settings file: config.json in Dir.
func SettingsFile() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config.json"), nil
}

// LoadSettings reads the settings file at path; none there is no
// settings. An unknown field or a bad value is an error naming the file.
func LoadSettings(path string) (Settings, error) {
	var s Settings
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("drover's settings: %w", err)
	}
	defer f.Close()
	err = decodeStrict(f, path, &s)
	return s, err
}
