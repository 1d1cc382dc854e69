package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// fileSource is one parsed config file.
type fileSource struct {
	path string
	src  source
	keys keyReport
}

// loadConfigPaths reads -config-file / -config-dir values in order. A
// directory contributes its *.json files in lexical order, as Consul does;
// other files in a directory are skipped, except *.hcl, which is an error
// because silently dropping someone's configuration is worse than failing.
func loadConfigPaths(paths []string, logger *slog.Logger) ([]fileSource, error) {
	var out []fileSource
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
		}
		if !fi.IsDir() {
			if ext := strings.ToLower(filepath.Ext(p)); ext != ".json" {
				return nil, fmt.Errorf("%w: %s: extension %q is not supported: Trellis reads JSON config files ending in .json", ErrConfigFile, p, ext)
			}
			fs, ok, err := loadFile(p)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, fs)
			}
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, name := range names {
			full := filepath.Join(p, name)
			switch strings.ToLower(filepath.Ext(name)) {
			case ".json":
			case ".hcl":
				return nil, fmt.Errorf("%w: %s: HCL config files are not supported: Trellis reads JSON only", ErrConfigFile, full)
			default:
				logger.Debug("skipping file in config dir: extension must be .json", "file", full)
				continue
			}
			fs, ok, err := loadFile(full)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, fs)
			}
		}
	}
	return out, nil
}

// loadFile parses one JSON config file. ok is false for an empty file,
// which Consul skips.
func loadFile(path string) (fs fileSource, ok bool, err error) {
	data, err := os.ReadFile(path) //nolint:gosec // a config file or directory entry the operator named
	if err != nil {
		return fileSource{}, false, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fileSource{}, false, nil
	}
	src, keys, err := parseJSON(data)
	if err != nil {
		return fileSource{}, false, fmt.Errorf("%w: %s: %w", ErrConfigFile, path, err)
	}
	return fileSource{path: path, src: *src, keys: keys}, true, nil
}

// parseJSON decodes a config document twice: generically, to account for
// every key against Consul's key tree, and into source for the keys Trellis
// honours.
func parseJSON(data []byte) (*source, keyReport, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, keyReport{}, describeJSONError(data, err)
	}
	obj, isObj := doc.(map[string]any)
	if !isObj {
		return nil, keyReport{}, errors.New("a config file must hold a JSON object")
	}
	var src source
	if err := json.Unmarshal(data, &src); err != nil {
		return nil, keyReport{}, describeJSONError(data, err)
	}
	return &src, classify(obj), nil
}

// describeJSONError turns encoding/json errors into messages that name the
// key and the line.
func describeJSONError(data []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "value"
		}
		return fmt.Errorf("%s: expected %s, got %s (line %d)", strings.ToLower(field), typeName(typeErr.Type.String()), typeErr.Value, lineOf(data, typeErr.Offset))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return fmt.Errorf("invalid JSON at line %d: %w", lineOf(data, syntaxErr.Offset), err)
	}
	return err
}

func typeName(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "config."):
		return "an object"
	}
	return goType
}

func lineOf(data []byte, offset int64) int {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	return bytes.Count(data[:offset], []byte("\n")) + 1
}
