package source

// NewGeneralDecoder is NewDecoder without the JSON fast path, for tests
// that compare the two.
func NewGeneralDecoder(def *Def, schemas *Schemas) (*Decoder, error) {
	d, err := NewDecoder(def, schemas)
	if err != nil {
		return nil, err
	}
	d.general = true
	return d, nil
}
