package store

import (
	"bytes"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestWarningsOnly(t *testing.T) {
	tests := []struct {
		name  string
		level zapcore.Level
		want  zapcore.Level // the lowest level the result logs
	}{
		{"a debug logger keeps warnings and up", zap.DebugLevel, zap.WarnLevel},
		{"an info logger keeps warnings and up", zap.InfoLevel, zap.WarnLevel},
		{"a warn logger stays as it is", zap.WarnLevel, zap.WarnLevel},
		{"an error logger stays as it is, with no complaint from zap", zap.ErrorLevel, zap.ErrorLevel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, complaints bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), tc.level)
			logger := warningsOnly(zap.New(core, zap.ErrorOutput(zapcore.AddSync(&complaints))))
			for l := zap.DebugLevel; l <= zap.ErrorLevel; l++ {
				if got, want := logger.Core().Enabled(l), l >= tc.want; got != want {
					t.Errorf("Enabled(%s) = %v; want %v", l, got, want)
				}
			}
			logger.Info("info")
			if complaints.Len() > 0 || bytes.Contains(out.Bytes(), []byte(`"info"`)) {
				t.Errorf("output %q, zap's complaints %q; want neither", out.String(), complaints.String())
			}
		})
	}
}
