/**
 * The generated world's name inventory. Deliberately small, so that a tiny model trained from
 * scratch sees every word many times, and so that names collide (two people called "Maria Lind",
 * a film named after a city): collisions are the world's distractors.
 */

export const FEMALE_FIRST = [
  'Maria', 'Anna', 'Eva', 'Clara', 'Ida', 'Lena', 'Nora', 'Sofia',
  'Alma', 'Greta', 'Hanna', 'Irene', 'Julia', 'Marta', 'Olga', 'Vera',
] as const;

export const MALE_FIRST = [
  'Jon', 'Erik', 'Hugo', 'Karl', 'Leo', 'Oskar', 'Paul', 'Viktor',
  'Adam', 'Bruno', 'Emil', 'Felix', 'Gustav', 'Henrik', 'Ivan', 'Otto',
] as const;

export const LAST_NAMES = [
  'Lind', 'Berg', 'Holm', 'Strand', 'Dahl', 'Falk', 'Moreau', 'Novak',
  'Brandt', 'Castell', 'Eklund', 'Ferrand', 'Gallo', 'Hart', 'Keller', 'Lorenz',
  'Marek', 'Nyberg', 'Orsini', 'Petrov', 'Quist', 'Rossi', 'Sandor', 'Varga',
] as const;

export const CITY_NAMES = [
  'Kessel', 'Varna', 'Orlin', 'Dunmore', 'Astra', 'Belmont', 'Corvo', 'Tarsk',
  'Halden', 'Idris', 'Jarrow', 'Lunde', 'Marrow', 'Nessa', 'Ostby', 'Pellan',
  'Quill', 'Rhune', 'Sorrel', 'Tavi', 'Ulm', 'Vesk', 'Wren', 'Yarrow',
  'Zell', 'Brisa', 'Calder', 'Drova', 'Fenn', 'Galt', 'Hollis', 'Isen',
  'Karst', 'Lorne', 'Mirin', 'Norrow', 'Oster', 'Pryce', 'Runa', 'Selby',
  'Torva', 'Ushan', 'Valen', 'Wexby', 'Arlen', 'Bram', 'Cresk', 'Dalby',
] as const;

export const COUNTRY_NAMES = [
  'Norvia', 'Estmark', 'Valoria', 'Drenholt', 'Carsinia', 'Merovan', 'Tulsany', 'Brevia',
  'Aldmoor', 'Sarnia', 'Kovar', 'Lestria',
] as const;

export const TITLE_ADJECTIVES = [
  'Silent', 'Golden', 'Hidden', 'Broken', 'Distant', 'Crimson', 'Quiet', 'Last',
  'Northern', 'Winter', 'Glass', 'Iron', 'Lost', 'Bright', 'Hollow', 'Secret',
] as const;

export const TITLE_NOUNS = [
  'River', 'Garden', 'Mountain', 'Harbor', 'Letter', 'Island', 'Road', 'Crown',
  'Mirror', 'Storm', 'Orchard', 'Bridge', 'Tower', 'Forest', 'Lantern', 'Shore',
] as const;

export const COMPANY_SUFFIXES = ['Industries', 'Motors', 'Foods', 'Textiles', 'Press', 'Records', 'Shipping', 'Steel'] as const;

/** Occupations of the people who make films, books and companies. */
export const MAKER_OCCUPATIONS = ['director', 'writer', 'entrepreneur'] as const;

/** Occupations of everyone else (the makers' parents and grandparents). */
export const OTHER_OCCUPATIONS = ['painter', 'teacher', 'engineer', 'singer', 'doctor', 'farmer', 'lawyer', 'architect'] as const;

/** How an occupation reads in a sentence ("Maria Lind is a film director from Norvia"). */
export const OCCUPATION_PHRASE: { [occupation: string]: string } = {
  director: 'film director',
  writer: 'novelist',
  entrepreneur: 'entrepreneur',
  painter: 'painter',
  teacher: 'teacher',
  engineer: 'engineer',
  singer: 'singer',
  doctor: 'doctor',
  farmer: 'farmer',
  lawyer: 'lawyer',
  architect: 'architect',
};
