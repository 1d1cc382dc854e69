package config

import (
	"bytes"
	"cmp"
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

// Config formats, as -config-format names them.
const (
	formatJSON = "json"
	formatHCL  = "hcl"
)

// formatOf is the format a file's extension gives ("" for neither).
func formatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return formatJSON
	case ".hcl":
		return formatHCL
	}
	return ""
}

// loadConfigPaths reads -config-file / -config-dir values in order. A
// directory contributes its *.json and *.hcl files in lexical order, as
// Consul does, and skips others. format, when set (-config-format), is the
// format of every file whatever its extension, and then every file of a
// directory is read, as in Consul.
func loadConfigPaths(paths []string, format string, logger *slog.Logger) ([]fileSource, error) {
	var out []fileSource
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
		}
		if !fi.IsDir() {
			f := cmp.Or(format, formatOf(p))
			if f == "" {
				return nil, fmt.Errorf("%w: %s: extension %q is not supported: name the file .json or .hcl, or set -config-format", ErrConfigFile, p, filepath.Ext(p))
			}
			fs, ok, err := loadFile(p, f)
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
			f := cmp.Or(format, formatOf(name))
			if f == "" {
				logger.Debug("skipping file in config dir: extension must be .json or .hcl", "file", full)
				continue
			}
			fs, ok, err := loadFile(full, f)
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

// loadFile parses one config file in format. ok is false for an empty
// file, which Consul skips.
func loadFile(path, format string) (fs fileSource, ok bool, err error) {
	data, err := os.ReadFile(path) //nolint:gosec // a config file or directory entry the operator named
	if err != nil {
		return fileSource{}, false, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fileSource{}, false, nil
	}
	fs, err = parseSource(path, data, format)
	return fs, err == nil, err
}

// parseSource parses one config document (a file or an -hcl fragment)
// named name in format.
func parseSource(name string, data []byte, format string) (fileSource, error) {
	var (
		src  *source
		keys keyReport
		err  error
	)
	if format == formatHCL {
		src, keys, err = parseHCLSource(data)
	} else {
		src, keys, err = parseJSON(data)
	}
	if err != nil {
		return fileSource{}, fmt.Errorf("%w: %s: %w", ErrConfigFile, name, err)
	}
	src.tagDefinitions(name)
	return fileSource{path: name, src: *src, keys: keys}, nil
}

// parseJSON decodes a config document twice: generically, to account for
// every key against Consul's key tree, and into source for the keys Trellis
// honours.
func parseJSON(data []byte) (*source, keyReport, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, keyReport{}, describeJSONError(data, err, true)
	}
	obj, isObj := doc.(map[string]any)
	if !isObj {
		return nil, keyReport{}, errors.New("a config file must hold a JSON object")
	}
	return decodeSource(obj, data, true)
}

// parseHCLSource decodes an HCL document through the JSON path. Its
// errors carry no line: the JSON they would point into is not the file.
func parseHCLSource(data []byte) (*source, keyReport, error) {
	obj, asJSON, err := parseHCL(data)
	if err != nil {
		return nil, keyReport{}, err
	}
	return decodeSource(obj, asJSON, false)
}

// decodeSource decodes the JSON form of a document whose generic form is
// obj into source, and accounts for its keys.
func decodeSource(obj map[string]any, data []byte, lines bool) (*source, keyReport, error) {
	var src source
	if err := json.Unmarshal(data, &src); err != nil {
		return nil, keyReport{}, describeJSONError(data, err, lines)
	}
	return &src, classify(obj), nil
}

// describeJSONError turns encoding/json errors into messages that name the
// key and, when lines is set, the line.
func describeJSONError(data []byte, err error, lines bool) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "value"
		}
		msg := fmt.Sprintf("%s: expected %s, got %s", strings.ToLower(field), typeName(typeErr.Type.String()), typeErr.Value)
		if lines && typeErr.Offset > 0 {
			msg += fmt.Sprintf(" (line %d)", lineOf(data, typeErr.Offset))
		}
		return errors.New(msg)
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
